"""What a run found: each figure's repetitions, medians, ratio and target, as
JSON (every repetition kept) and as a rich table."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

# Figures of toolrun alone: bare Celery has no approvals, and no limits to cost anything.
ALONE = (
    *("P7_threads", "P7_rss", "L1_P1", "L1_P3", "I1_import", "I1_help"),
    *("P8_look", "P8_prune"),
)
FIGURES = (
    "P1_p50",
    "P1_p99",
    "P2",
    "P3",
    "P4",
    "P5",
    "P6",
    "R1",
    "G1",
    "G2",
    "M1",
    "A1",
    "F1",
    "S1",
    "P8",
    "P9",
    "P9_mem",
    "P10",
    *ALONE,
)


@dataclass(frozen=True)
class Target:
    """What must hold: of the ratio toolrun/baseline, of what toolrun adds to the
    baseline (toolrun - baseline), or of toolrun's value alone."""

    of: Literal["ratio", "added", "toolrun"]
    op: Literal["<=", ">="]
    value: float

    def met(
        self, toolrun: float, ratio: float | None, baseline: float | None = None
    ) -> bool | None:
        subject = {"ratio": ratio, "toolrun": toolrun}.get(self.of)
        if self.of == "added":
            subject = None if baseline is None else toolrun - baseline
        if subject is None:
            return None
        return subject <= self.value if self.op == "<=" else subject >= self.value

    def text(self, unit: str) -> str:
        if self.of == "ratio":
            return f"ratio {self.op} {self.value:g}"
        if self.of == "added":
            return f"adds {self.op} {_number(self.value, unit)} {unit}"
        return f"{self.op} {_number(self.value, unit)} {unit}"


@dataclass
class Figure:
    key: str
    title: str
    unit: str
    target: Target
    toolrun: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def toolrun_median(self) -> float:
        return statistics.median(self.toolrun)

    @property
    def baseline_median(self) -> float | None:
        return statistics.median(self.baseline) if self.baseline else None

    @property
    def ratio(self) -> float | None:
        base = self.baseline_median
        return self.toolrun_median / base if base else None

    @property
    def passed(self) -> bool | None:
        return self.target.met(self.toolrun_median, self.ratio, self.baseline_median)

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "unit": self.unit,
            "toolrun": {"repetitions": self.toolrun, "median": self.toolrun_median},
            "baseline": {"repetitions": self.baseline, "median": self.baseline_median},
            "ratio": self.ratio,
            "target": {**vars(self.target), "text": self.target.text(self.unit)},
            "pass": self.passed,
            "note": self.note,
            **self.extra,
        }


def write_json(path: Path, figures: list[Figure], meta: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {**meta, "figures": {figure.key: figure.as_dict() for figure in figures}}
    path.write_text(json.dumps(body, indent=2) + "\n")
    return path


def print_table(console: Console, figures: list[Figure], caption: str) -> None:
    table = Table(title="toolrun vs bare Celery (medians)", caption=caption)
    for column in ("figure", "toolrun", "baseline", "ratio", "target", "result"):
        justify = "left" if column in ("figure", "target") else "right"
        table.add_column(column, justify=justify)
    for figure in figures:
        base = figure.baseline_median
        verdict = {True: "[green]pass[/]", False: "[red]miss[/]", None: "n/a"}[figure.passed]
        table.add_row(
            f"{figure.key} {figure.title}",
            f"{_number(figure.toolrun_median, figure.unit)} {figure.unit}",
            "" if base is None else f"{_number(base, figure.unit)} {figure.unit}",
            "" if figure.ratio is None else f"{figure.ratio:.2f}",
            figure.target.text(figure.unit),
            verdict,
        )
    console.print(table)


def print_cpu(console: Console, figures: list[Figure]) -> None:
    """Each process's CPU per call, per side, for the figures that measured it."""
    table = Table(title="CPU per call (ms), each process, each side")
    for column in ("figure", "side", "client", "reads worker", "effects worker", "redis", "all"):
        table.add_column(column, justify="left" if column in ("figure", "side") else "right")
    for figure in figures:
        for side, spent in figure.extra.get("cpu_ms_per_call", {}).items():
            workers = {
                kind: sum(
                    ms for name, ms in spent.items() if name.startswith(side) and kind in name
                )
                for kind in ("reads", "effects")
            }
            cells = [
                spent.get("client", 0.0),
                workers["reads"],
                workers["effects"],
                spent.get("redis", 0.0),
            ]
            table.add_row(
                figure.key, side, *(f"{ms:.2f}" for ms in cells), f"{sum(spent.values()):.2f}"
            )
    if table.row_count:
        console.print(table)


def _number(value: float, unit: str) -> str:
    if unit in ("x",):
        return f"{value:.2f}"
    if unit in ("calls/s",):
        return f"{value:,.0f}"
    return f"{value:,.1f}"
