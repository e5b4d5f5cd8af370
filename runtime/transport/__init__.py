"""How calls and results travel: the Celery app, names of queues and keys, the outbox,
chains, the results channel and listener, signatures.
"""
