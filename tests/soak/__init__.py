"""The soak (`python -m tests.soak`, `make soak`): see `tests/soak/__main__.py`."""
