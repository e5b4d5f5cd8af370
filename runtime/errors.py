"""One tree for the exceptions of toolrun.

Exceptions are for programmer and infrastructure faults. Errors the model should
see are `ToolResult` values, made from these in one place: `runtime/execution/executor.py`.
"""

from __future__ import annotations

from runtime.types import Status


class ToolrunError(Exception):
    """Base of every exception toolrun raises on purpose."""


class ConfigurationError(ToolrunError):
    """Settings, a tool module or a registry entry is wrong; raised at startup."""


class StackError(ToolrunError):
    """The embedded stack (redis-server, workers, Flower) cannot start or be found."""


class LedgerUnavailable(ToolrunError):
    """The audit ledger cannot be written, after retries."""


class LedgerRefused(LedgerUnavailable):
    """The database refused the write itself (a value it cannot store, a
    constraint): retrying cannot help. Callers that fail closed treat it as an
    outage; a buffer of rows drops it, logged, rather than hold back every later row."""


class StateUnavailable(ToolrunError):
    """The batch's shared state (Redis in a deployment) cannot be reached. Raised
    by every implementation of the state seam instead of its client's own
    errors, so that nothing above the seam knows what stores the state."""


class ToolError(ToolrunError):
    """Raised by a tool for a failure the model should read and can act on.

    `status` is the result status it becomes (`error` unless a subclass says
    otherwise); the message is sent to the model as it is, so it must be short
    and say what to do differently.
    """

    status: Status = Status.error

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or type(self).__name__


class PathOutsideWorkspace(ToolError):
    """A path resolves outside the batch's workspace (symlinks included)."""

    status = Status.denied


class AddressRefused(ToolError):
    """A network tool was asked to reach an internal address (loopback,
    private, link-local...) that the org policy does not name."""

    status = Status.denied


class SandboxUnavailable(ToolError):
    """A call would start a process, and the sandbox every such process runs in
    cannot be had on this worker (docs/architecture.md, "The sandbox"): nothing ran."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="sandbox_unavailable")


class UnsupportedArgument(ToolError):
    """An argument is well-formed but asks for something the tool cannot do
    safely (a regular expression feature the linear-time engine leaves out)."""

    status = Status.invalid_arguments


class InvalidBatch(ToolrunError):
    """The orchestrator's batch cannot be run at all (duplicate call ids, a
    workspace that does not exist). Model mistakes never raise this."""


class KeyConflict(InvalidBatch):
    """A submit key used again for a batch that differs from the one it
    started; `differs` says in what (its calls, mode, workspace, `on_error`
    or policy)."""

    def __init__(self, message: str, *, differs: str) -> None:
        super().__init__(message)
        self.differs = differs


class BatchTooLarge(InvalidBatch):
    """More calls than the policy's `limits.size.calls_per_batch` allows:
    refused before anything of the batch is written (the gateway's 413)."""


class TooManyOpenBatches(InvalidBatch):
    """The submitter has as many open batches as the policy's
    `limits.size.open_batches_per_key` allows (the gateway's 429)."""


class HookFailed(ToolrunError):
    """A policy hook gave no answer: it timed out, could not be reached or
    started, or answered with something that is not an answer. The org's
    `on_failure` says what the call gets then (runtime/gate/hooks/), unless
    the failure is `non_blocking`: a command that exited with a code other than
    0 or 2, which Claude Code's hooks treat as an error that blocks nothing."""

    def __init__(self, message: str, *, non_blocking: bool = False) -> None:
        super().__init__(message)
        self.non_blocking = non_blocking


class CallTimedOut(BaseException):
    """Raised inside a tool's thread once its call has timed out, so a tool still
    running Python code stops instead of holding a core or a slot for nothing.

    A `BaseException`, like `KeyboardInterrupt`, so that a tool's `except
    Exception` does not swallow it. A tool blocked in C (a socket read, waiting
    for a child process) only sees it when that call returns."""
