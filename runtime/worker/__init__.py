"""The worker: what happens to a task message on the cluster's side
(`Worker`), the sweep's loop, and an in-process transport that runs the same
`Worker` on threads."""

from runtime.worker.worker import Worker

__all__ = ["Worker"]
