# make test-fixtures: the committed vendor fixtures (tests/fixtures/*/fixture.json,
# made by tools/fixtures/build_fixtures.py with Mobius and the onnxruntime-genai
# model builder) against their goldens: the installed onnxruntime reproduces each
# ORT golden, HF transformers and ORT goldens agree up to the margin threshold,
# onnxruntime-genai decodes the same ids, prompts match HF tokenizers, and the KV
# geometry of the graphs and of `graft inspect --json` matches the HF configs.
TEST_TARGETS += test-fixtures
.PHONY: test-fixtures
test-fixtures: deps $(GRAFT)
	$(PY) tests/fixtures_test/test_fixtures.py --graft $(GRAFT)
