"""Why the allow rules that name a tool did not cover a call, said in the reason
of the decision the mode made instead (docs/architecture.md, "The permission
gate"). A person who gave `--allow 'shell(sleep *)'` for `sleep 1; echo done`
learns that the command has two parts and the rule covered only the first,
rather than reading "destructive tools need approval ... without a rule"."""

from __future__ import annotations

from pathlib import Path

from runtime.gate.decision import Effect
from runtime.gate.rules import Rule, matching
from runtime.gate.shell import commands
from runtime.gate.shell.analysis import Analysis, Segment
from runtime.gate.shell.patterns import covers, matches

_SHOWN = 60  # characters of a part or a path quoted in a reason


def note(rules, tool: str, kind: str | None, subjects: list[str], workspace: Path) -> str | None:
    """What the allow rules with a specifier that name `tool` were tried against
    and why none covered the call (for a command, also the flags that kept every
    rule's `*` off it), or None when there is nothing to say."""
    tried = [r for r in rules if r.effect is Effect.allow and r.specifier and r.names(tool)]
    if kind == "command" and subjects:
        analysis = commands.analyze(subjects[0], workspace)
        missed = _command_miss(tried, analysis) if tried else None
        notes = [missed, commands.escape_note(analysis)]
        return "; ".join(text for text in notes if text) or None
    if not tried or kind is None or not subjects:
        return None
    return _subject_miss(tried, tool, kind, subjects, workspace)


def _command_miss(tried: list[Rule], analysis: Analysis) -> str | None:
    names = _names(tried)
    if analysis.opaque:
        return f"{names} covers no command that cannot be read, and {analysis.opaque}"
    if not analysis.segments:
        return None
    outside = commands.outside_redirects(analysis)
    if outside:
        targets = ", ".join(_quoted(target) for target in outside[:3])
        return (
            f"{names} covers no command that redirects outside the workspace or "
            f"where only running it would tell ({targets})"
        )
    settings = commands.touches_settings(analysis)
    if settings:
        return f"{names} covers no command that may change toolrun's settings: {settings}"
    patterns = [rule.specifier for rule in tried]
    covered = [s for s in analysis.segments if any(covers(p, s) for p in patterns)]
    # A part some rule matches but does not cover holds a flag that escapes: the
    # escape note names it.
    missed = [s for s in analysis.segments if not any(matches(p, s) for p in patterns)]
    if not missed:
        return None
    if covered:
        return (
            f"{names} matched {_parts(covered)} but not {_parts(missed)}: a compound "
            "command runs only when an allow rule covers every part"
        )
    if len(analysis.segments) > 1:
        return f"{names} matched no part of the command ({_parts(missed)})"
    return f"{names} does not match {_parts(missed)}"


def _subject_miss(
    tried: list[Rule], tool: str, kind: str, subjects: list[str], workspace: Path
) -> str | None:
    def hit(subject: str) -> bool:
        return any(matching([rule], tool, kind, [subject], workspace) for rule in tried)

    covered = [subject for subject in subjects if hit(subject)]
    missed = [subject for subject in subjects if subject not in covered]
    if not missed:  # every subject is some rule's, but no one rule holds them all
        return (
            f"{_names(tried)} each matched only some of {_listed(subjects)}: one allow "
            "rule must cover all of them"
        )
    noun = "the host of" if kind != "path" else ""
    shown = f"{noun} {_listed(missed)}".strip()
    text = (
        f"{_names(tried)} matched {_listed(covered)} but not {shown}"
        if covered
        else f"{_names(tried)} does not match {shown}"
    )
    if kind == "path" and any("*" in r.specifier and "**" not in r.specifier for r in tried):
        text += " (in a path rule `*` stays within one directory; `**` crosses them)"
    return text


def _names(rules: list[Rule]) -> str:
    texts = list(dict.fromkeys(rule.text for rule in rules))
    if len(texts) == 1:
        return f"the allow rule {texts[0]}"
    shown = ", ".join(texts[:4]) + (", ..." if len(texts) > 4 else "")
    return f"the allow rules {shown}"


def _parts(segments: list[Segment]) -> str:
    return _listed([segment.text for segment in segments])


def _listed(texts: list[str]) -> str:
    shown = ", ".join(_quoted(text) for text in texts[:3])
    return shown + (f" and {len(texts) - 3} more" if len(texts) > 3 else "")


def _quoted(text: str) -> str:
    return f"`{text if len(text) <= _SHOWN else text[: _SHOWN - 3] + '...'}`"
