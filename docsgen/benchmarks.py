"""The benchmark page's figures: a dated table from the newest bench JSON under
docs/benchmarks/ (the file `make bench` writes to .toolrun/, copied there).
Replacing that file is all it takes to publish new figures."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

MARKER = "<!-- bench-figures -->"


def newest(folder: Path) -> Path | None:
    """The run that started last, by the `started_at` it records (else its name)."""
    found = sorted(folder.glob("bench-*.json"), key=lambda p: (_started(p), p.name))
    return found[-1] if found else None


def _started(path: Path) -> str:
    try:
        return json.loads(path.read_text()).get("started_at", "")
    except (OSError, ValueError):
        return ""


def number(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if unit == "x":
        return f"{value:.2f} x"
    if unit == "calls/s":
        return f"{value:,.0f} calls/s"
    return f"{value:,.1f} {unit}"


def verdict(passed: bool | None) -> str:
    return {True: "met", False: "missed", None: ""}[passed]


def when(stamp: str) -> str:
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return stamp or "an unrecorded date"


def machine(meta: dict[str, Any]) -> str:
    """The machine line: `make bench` records cpus, platform, versions, commit."""
    info = meta.get("machine") or {}
    if not isinstance(info, dict):
        return str(info)
    parts = [
        f"{info['cpus']} CPUs" if info.get("cpus") else "",
        info.get("platform", ""),
        f"Python {info['python']}" if info.get("python") else "",
        f"Celery {info['celery']}" if info.get("celery") else "",
        f"Redis {info['redis_server']}" if info.get("redis_server") else "",
    ]
    if info.get("commit"):
        dirty = " with uncommitted changes" if info.get("dirty") else ""
        parts.append(f"commit {info['commit']}{dirty}")
    return ", ".join(part for part in parts if part)


def table(path: Path) -> str:
    run = json.loads(path.read_text())
    rows = [
        "| figure | toolrun | bare Celery | ratio | target | |",
        "|---|---|---|---|---|---|",
    ]
    for key, figure in run["figures"].items():
        unit = figure.get("unit", "")
        rows.append(
            "| {} {} | {} | {} | {} | {} | {} |".format(
                key,
                figure.get("title", ""),
                number(figure["toolrun"]["median"], unit),
                number(figure["baseline"]["median"], unit),
                "" if figure.get("ratio") is None else f"{figure['ratio']:.2f}",
                figure.get("target", {}).get("text", ""),
                verdict(figure.get("pass")),
            )
        )
    cpu = cpu_table(run)
    head = (
        f"### Figures of {when(run.get('started_at', ''))}\n\n"
        f"From [`{path.name}`]({path.name}) ({'quick sizes; ' if run.get('quick') else ''}"
        f"{run.get('caption', '')}). Machine: {machine(run) or 'not recorded'}.\n\n"
    )
    if run.get("note"):  # what the JSON's committer added about the run
        head += f"{run['note']}\n\n"
    return head + "\n".join(rows) + "\n" + cpu


def cpu_table(run: dict[str, Any]) -> str:
    rows = []
    for key, figure in run["figures"].items():
        for side, spent in figure.get("cpu_ms_per_call", {}).items():
            by_kind = {
                kind: sum(
                    ms for name, ms in spent.items() if name.startswith(side) and kind in name
                )
                for kind in ("reads", "effects")
            }
            cells = [spent.get("client", 0.0), by_kind["reads"], by_kind["effects"]]
            cells += [spent.get("redis", 0.0), sum(spent.values())]
            label = "bare Celery" if side == "baseline" else side
            rows.append(f"| {key} {label} | " + " | ".join(f"{ms:.2f}" for ms in cells) + " |")
    if not rows:
        return ""
    head = [
        "",
        "CPU each process spent per call, in milliseconds:",
        "",
        "| figure, side | client | reads worker | effects worker | Redis | all |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n"


def render(markdown: str, folder: Path) -> str:
    """The page with its marker replaced by the newest run's tables."""
    if MARKER not in markdown:
        return markdown
    path = newest(folder)
    figures = table(path) if path else "No bench JSON is committed under docs/benchmarks/ yet.\n"
    return markdown.replace(MARKER, figures)
