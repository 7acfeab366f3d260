# make demo: graft's main job on the committed default pipeline, the tiny
# Gemma 4 multimodal pipeline exported by Mobius (tests/fixtures/gemma4-mobius):
# compose it into one text-only export, inspect the result, decode a text
# prompt on graft's CPU runtime, and verify the greedy tokens against the
# ONNX Runtime golden of the pipeline.
DEMO_PIPELINE := tests/fixtures/gemma4-mobius
DEMO_EXPORT   := $(BUILD)/demo/gemma4-export

.PHONY: demo
demo: deps all
	@mkdir -p $(dir $(DEMO_EXPORT))
	$(GRAFT) compose $(DEMO_PIPELINE) -o $(DEMO_EXPORT) --force
	$(GRAFT) inspect $(DEMO_EXPORT)/model.onnx
	$(GRAFT) generate $(DEMO_EXPORT) --prompt "The quick brown fox" --max-new-tokens 16
	$(GRAFT) verify $(DEMO_EXPORT) --golden $(DEMO_PIPELINE)/golden.ort.json
