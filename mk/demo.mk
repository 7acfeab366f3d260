# make demo: graft's main job on the committed default model. For now that is
# `graft inspect` on the stand-in decoder of tests/fixtures/demo (written by
# tools/make_demo_model.py); it grows into compose + decode + verify.
.PHONY: demo
demo: deps all
	$(GRAFT) inspect tests/fixtures/demo/model.onnx
