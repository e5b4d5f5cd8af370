"""The sandbox every process a tool starts runs in: shell commands and whatever
they run, and MCP stdio servers (docs/architecture.md, "The sandbox").

`confine` is the one entry: it wraps a command line in bubblewrap, or refuses
with `SandboxUnavailable` when this machine cannot confine it, or, only where
the org policy or the worker's settings turned the sandbox off, returns it as
it is and notes that the call ran a process unconfined.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from runtime.errors import SandboxUnavailable
from runtime.sandbox.availability import Availability, availability, unavailable_message
from runtime.sandbox.command import command
from runtime.sandbox.network import allowed
from runtime.sandbox.proxy import Proxy
from runtime.settings import Settings, get_settings

__all__ = [
    "UNCONFINED",
    "Availability",
    "allowed",
    "availability",
    "confine",
    "enabled_by",
    "reaching",
    "state",
]
UNCONFINED = "unconfined"  # the mark on the summary of a call that ran a process unconfined


def confine(
    argv: list[str],
    *,
    confined: bool,
    workspace: Path,
    env: Mapping[str, str],
    cwd: Path | None = None,
    read_only: Iterable[Path] = (),
    places: Iterable[Path] = (),
    noted: list[str] | None = None,
    proxy: Path | None = None,
) -> list[str]:
    """`argv` as it must be started. `confined` False (an explicit org or worker
    setting) leaves it as it is and appends to `noted`; otherwise the sandbox
    wraps it, or `SandboxUnavailable` says why it cannot. `proxy`: the socket of
    the call's proxy (`reaching`), for a call the policy lets reach hosts."""
    if not confined:
        if noted is not None:
            noted.append(argv[0])
        return argv
    state = availability(get_settings().bwrap)
    if not state.ok or state.bwrap is None:
        raise SandboxUnavailable(unavailable_message(state.reason or "no bubblewrap"))
    return command(
        state.bwrap,
        argv,
        workspace=workspace,
        cwd=cwd,
        env=env,
        read_only=read_only,
        places=places,
        proxy=proxy,
    )


@contextmanager
def reaching(hosts: tuple[str, ...], internal: tuple[str, ...] = ()) -> Iterator[Path | None]:
    """The socket of a proxy to `hosts` (the policy's `sandbox.network.allow`;
    `internal`: its `internal_hosts`), served until the block ends; None when
    there are no hosts: the sandbox then has no network at all."""
    if not hosts:
        yield None
        return
    with Proxy(hosts, internal) as proxy:
        yield proxy.path


def enabled_by(policy: Mapping) -> bool:
    """Whether a batch's policy (its signed snapshot) leaves the sandbox on: only
    the org policy's `"sandbox": {"enabled": false}` turns it off."""
    return (policy.get("sandbox") or {}).get("enabled", True) is not False


def state(settings: Settings) -> str:
    """The sandbox on this machine in one line (a worker's start, `toolrun status`)."""
    if not settings.sandbox:
        return "off (TOOLRUN_SANDBOX=false): the processes tools start run unconfined, marked"
    return availability(settings.bwrap).describe()
