"""The client's side: `Runtime` (submit, approve, deny, cancel), and a batch as
its submitter follows it (`run`, `handle`, `events`, `follower`, `audit`). The
cluster's side of a batch, its rules and their carrying out, is `runtime/batch/`."""

from runtime.client.runtime import Runtime

__all__ = ["Runtime"]
