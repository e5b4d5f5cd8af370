"""How calls and results travel: the Celery app, the outbox, chains, the batch's
state in Redis behind its seams, the results channel and listener, signatures
(the names of queues and keys are `runtime/keyspace/`; flow control's counters
in Redis, `runtime/flow/`).
"""
