"""A command line run inside bubblewrap (docs/architecture.md, "The sandbox").

Every namespace is new (`--unshare-all`): its own pids, so `/proc` shows only the
sandbox's processes and none of the worker's environments; its own network, with
only a loopback of its own, so toolrun's Redis, broker and ledger are out of reach
(where the policy lists hosts, a bridge on that loopback leads to the call's proxy);
its own IPC, hostname and cgroup view. Inside, the process runs as `nobody`
(65534) with no capability, in a session of its own, and dies with bubblewrap;
its environment is exactly `env` (`--clearenv`), its home an empty private
directory. The user namespace maps `nobody` to the worker's own user, so files
the worker owns in the workspace stay writable, and nothing else of the host is
mounted writable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from runtime.sandbox import network, view

NOBODY = "65534"
ISOLATION = (
    "--unshare-all",
    # The command is the pid namespace's first process, bubblewrap's direct child:
    # bubblewrap reaps it, so its CPU time reaches the call's (bubblewrap's own
    # init would exit unwaited-for, and the time with it), and its end ends the
    # namespace, background jobs and all.
    "--as-pid-1",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--uid",
    NOBODY,
    "--gid",
    NOBODY,
    "--hostname",
    "sandbox",
)


def command(
    bwrap: Path,
    argv: list[str],
    *,
    workspace: Path,
    cwd: Path | None = None,
    env: Mapping[str, str],
    read_only: Iterable[Path] = (),
    places: Iterable[Path] = (),
    proxy: Path | None = None,
) -> list[str]:
    """`argv` wrapped to run confined to `workspace` (read-write), started in
    `cwd` (the workspace by default); with `proxy` (the call's proxy's socket),
    behind the bridge that lets it reach the hosts the policy lists
    (`runtime.sandbox.network`)."""
    if proxy is not None:
        argv, env = network.bridged(argv, env)
    environment = {**env, "HOME": view.HOME, "TMPDIR": "/tmp"}
    settings = [item for name, value in environment.items() for item in ("--setenv", name, value)]
    mounts = view.options(workspace, cwd or workspace, read_only, places)
    if proxy is not None:
        mounts = [*mounts, *network.mounts(proxy)]
    return [str(bwrap), *ISOLATION, *mounts, "--clearenv", *settings, "--", *argv]
