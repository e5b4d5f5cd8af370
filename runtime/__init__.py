"""toolrun: runs the tool calls of AI agents on Celery workers, safely and audited.

The names below are the public API (`tests/test_exported_members.py` pins
them); every other module is toolrun's own and may change. Importing `runtime`
stays light, so a module that only defines tools does not pull in Celery,
Redis or the ledger: the names that need them load on first use.
"""

from importlib import import_module

from runtime.errors import (
    BatchTooLarge,
    ConfigurationError,
    InvalidBatch,
    KeyConflict,
    LedgerRefused,
    LedgerUnavailable,
    PathOutsideWorkspace,
    StackError,
    StateUnavailable,
    ToolError,
    ToolrunError,
    TooManyOpenBatches,
    UnsupportedArgument,
)
from runtime.registry.capabilities import (
    CapabilitySpec,
    Registry,
    ToolContext,
    ToolInput,
    ToolOutput,
    registry,
    tool,
)
from runtime.types import (
    ApprovalRequested,
    Batch,
    ErrorInfo,
    Media,
    Mode,
    OnError,
    Risk,
    Status,
    ToolCall,
    ToolResult,
    Usage,
)

# Loaded on first use: the client pulls in Celery, Redis and the ledger, and
# settings pull in the secret detectors; tools that only need `@tool` should not.
_LAZY = {
    "AsyncBatchHandle": "runtime.client.handle",
    "BatchHandle": "runtime.client.handle",
    "Runtime": "runtime.client",
    "Settings": "runtime.settings",
    "adapters": None,  # the module itself: parse, reply, definitions
    "memory_runtime": "runtime.testing",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    module = _LAZY[name]
    if module is None:
        value = import_module(f"runtime.{name}")
    else:
        value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ApprovalRequested",
    "AsyncBatchHandle",
    "Batch",
    "BatchHandle",
    "CapabilitySpec",
    "ConfigurationError",
    "ErrorInfo",
    "InvalidBatch",
    "BatchTooLarge",
    "TooManyOpenBatches",
    "KeyConflict",
    "LedgerRefused",
    "LedgerUnavailable",
    "Media",
    "Mode",
    "OnError",
    "PathOutsideWorkspace",
    "Registry",
    "Risk",
    "Runtime",
    "Settings",
    "StackError",
    "StateUnavailable",
    "Status",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolInput",
    "ToolOutput",
    "ToolResult",
    "ToolrunError",
    "UnsupportedArgument",
    "Usage",
    "adapters",
    "memory_runtime",
    "registry",
    "tool",
]
