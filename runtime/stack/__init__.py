"""The embedded stack: Redis server, worker processes, Flower, the stack record, status,
the demo.
"""
