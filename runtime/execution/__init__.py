"""Where a tool runs: the executor (check again, claim, invoke, record), the invocation
with its timeout.
"""
