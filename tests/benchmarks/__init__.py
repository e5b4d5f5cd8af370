"""`make bench`: toolrun against a bare Celery baseline on one embedded stack.

`python -m tests.benchmarks.bench --help` for the sizes. Not part of `make test`;
`tests/test_bench_smoke.py` runs it with tiny sizes to keep it working.
"""
