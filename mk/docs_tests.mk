# make test-docs: docs/SWITCHES.md names every GRAFT_* variable the sources name, and no other.
TEST_TARGETS += test-docs
.PHONY: test-docs
test-docs:
	python3 tests/docs/check_switches.py
