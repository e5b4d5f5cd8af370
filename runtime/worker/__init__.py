"""The worker: what happens to a task message on the cluster's side
(`Worker`), the sweep's loop, and the in-memory transport with that same
`Worker` wired in (`in_memory`)."""

from runtime.worker.worker import Worker

__all__ = ["Worker"]
