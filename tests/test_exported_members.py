"""The public names of `runtime`: a change to them is a change of the contract,
made here on purpose, not by a refactoring that moves a module."""

from __future__ import annotations

import subprocess
import sys

import runtime
from runtime.errors import ToolrunError

EXPORTED = [
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


def test_the_exported_names_are_these():
    assert runtime.__all__ == EXPORTED


def test_every_exported_name_resolves_and_dir_shows_it():
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None, name
    assert set(runtime.__all__) <= set(dir(runtime))
    namespace: dict = {}
    exec("from runtime import *", namespace)
    assert set(runtime.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error():
    try:
        runtime.NoSuchThing  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("runtime.NoSuchThing resolved")


def test_every_exported_exception_is_a_toolrun_error():
    exceptions = [
        getattr(runtime, n)
        for n in runtime.__all__
        if isinstance(getattr(runtime, n), type) and issubclass(getattr(runtime, n), BaseException)
    ]
    assert {e.__name__ for e in exceptions} >= {
        "InvalidBatch",
        "LedgerUnavailable",
        "ConfigurationError",
        "ToolError",
    }
    assert all(issubclass(e, ToolrunError) for e in exceptions)


def test_the_names_are_the_ones_the_modules_raise():
    """One class, wherever it is imported from: `except runtime.InvalidBatch`
    catches what `runtime.client` raises."""
    from runtime import errors, types
    from runtime.client import Runtime, handle

    assert runtime.InvalidBatch is errors.InvalidBatch
    assert runtime.ToolResult is types.ToolResult
    assert runtime.Runtime is Runtime and runtime.BatchHandle is handle.BatchHandle


def test_importing_runtime_for_tools_loads_no_client():
    """A module that only defines tools imports `runtime` without Celery, Redis,
    the ledger or the secret detectors; the client's names load on first use."""
    code = (
        "import sys, runtime\n"
        "from runtime import tool, ToolInput, ToolOutput, ToolContext, ToolError, InvalidBatch\n"
        "heavy = ('celery', 'redis', 'kombu', 'sqlalchemy', 'sqlmodel', 'detect_secrets')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_exported_name_and_its_public_members_say_what_they_promise():
    """The public API is read in its docstrings (docs/reference/python.md is
    built from them): an exported class, function or method without one is
    undocumented API. `OnError` is a type alias, documented where it is made."""
    undocumented = []
    for name in runtime.__all__:
        value = getattr(runtime, name)
        if name == "OnError":
            continue
        if not (value.__doc__ or "").strip():
            undocumented.append(name)
        if not isinstance(value, type) or not value.__module__.startswith("runtime"):
            continue
        for member, attribute in vars(value).items():
            function = attribute.fget if isinstance(attribute, property) else attribute
            function = getattr(function, "__func__", function)
            if member.startswith("_") or not callable(function):
                continue
            if not (function.__doc__ or "").strip():
                undocumented.append(f"{name}.{member}")
    assert undocumented == []
