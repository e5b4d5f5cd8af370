"""What every Redis-facing part shares, below them all: `names` (every name
two processes agree on: the queues, the task, the Redis keys and channels,
and how long each key lives) and `scripted` (a Redis client whose Lua scripts
ride pipelines as EVALSHA, and `LOST`, Redis's errors of a lost connection,
raised as `StateUnavailable`) (docs/architecture.md, "Names", "Flow control")."""
