"""A hook that is a Python callable, named in the policy by its dotted name
(`package.module:function`) and imported by every process that runs it: the
submitter for pre hooks, the workers for post hooks. Installing the package
where the runtime and the workers run is its registration. It is called with
the request (a dict) and returns the answer (a dict, or None for no opinion),
on a thread of its own, so that a callable past its timeout is a failure of
the hook, not a stuck submit (the thread is left to finish; Python cannot stop it).
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable
from typing import Any

from runtime.errors import HookFailed
from runtime.gate.hooks.declaration import Hook


def ask(hook: Hook, request: dict[str, Any], key: bytes) -> Any:
    function = resolve(str(hook.target))
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function(request)
        except Exception as error:  # noqa: BLE001 - a hook's fault is its failure, judged by on_failure
            outcome["error"] = error

    thread = threading.Thread(target=target, name=f"toolrun-hook-{hook.name}", daemon=True)
    thread.start()
    thread.join(hook.timeout)
    if thread.is_alive():
        raise HookFailed(f"gave no answer within {hook.timeout:g} s")
    if "error" in outcome:
        error = outcome["error"]
        raise HookFailed(f"raised {type(error).__name__}: {error}")
    return outcome.get("value")


@functools.lru_cache(maxsize=64)
def resolve(name: str) -> Callable[[dict[str, Any]], Any]:
    """The callable `name` names; `HookFailed` if it cannot be imported."""
    module_name, _, attribute = name.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise HookFailed(f"cannot import {name}: {error}") from None
    if not callable(found):
        raise HookFailed(f"{name} is not callable")
    return found
