"""toolrun: runs the tool calls of AI agents on Celery workers, safely and audited."""

from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, registry, tool
from runtime.types import (
    ApprovalRequested,
    Batch,
    ErrorInfo,
    Mode,
    Risk,
    Status,
    ToolCall,
    ToolResult,
)


def __getattr__(name: str):
    # The client pulls in Celery and Redis; tools that only need `@tool` should not.
    if name == "Runtime":
        from runtime.client import Runtime

        return Runtime
    if name in ("BatchHandle", "AsyncBatchHandle"):
        from runtime.batch import handle

        return getattr(handle, name)
    raise AttributeError(name)


__all__ = [
    "ApprovalRequested",
    "AsyncBatchHandle",
    "Batch",
    "BatchHandle",
    "ErrorInfo",
    "Mode",
    "Risk",
    "Runtime",
    "Status",
    "ToolCall",
    "ToolContext",
    "ToolInput",
    "ToolOutput",
    "ToolResult",
    "registry",
    "tool",
]
