"""Reading a shell command line as bash would, simplified: tokens (words with
quotes removed, operators), then segments, redirect targets and `cd` targets.

The lexer notes as it goes why a line cannot be read reliably (expansions,
here-documents, unbalanced quotes, ...); `runtime.gate.shell.commands` turns those notes
into an `Analysis`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SEPARATORS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|", "\n")
REDIRECTS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">")
RESERVED = {"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until"}
RESERVED |= {"time", "coproc", "esac", "function"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
FD_TARGET = re.compile(r"\d+-?|-")
LOOSE_BRACE = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


@dataclass
class Word:
    value: str
    quoted: bool
    loose: bool = False  # bash may expand it into words starting with `-` (see `Lexer._loose`)


@dataclass(frozen=True)
class Op:
    kind: str  # "sep", "redirect" or "group"
    text: str


class Lexer:
    """Tokens of a bash command line: words (quotes removed, expansions kept as
    written) and operators; notes why the line is opaque as it goes."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0
        self.tokens: list[Word | Op] = []
        self.reasons: list[str] = []
        self.subcommands: list[str] = []
        self.buf: list[str] = []
        self.in_word = self.quoted = False
        self.glob_lead: str | None = None  # the word's text before its first unquoted glob
        self.brace_lead: str | None = None  # ... and before its first unquoted `{`

    def run(self) -> None:
        text = self.text
        while self.pos < len(text):
            char, ahead = text[self.pos], text[self.pos : self.pos + 2]
            if char in " \t":
                self._end_word()
                self.pos += 1
            elif char == "#" and not self.in_word:
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif char == "\\":
                self._escape()
            elif char == "'":
                self._single()
            elif char == '"':
                self._double()
            elif char == "$":
                self._dollar(in_quotes=False)
            elif char == "`":
                self._backtick()
            elif ahead in ("<(", ">("):
                self._substitution(self.pos + 1, "process substitution")
            elif char in "<>" or ahead == "&>":
                self._redirect()
            elif char in ";&|\n":
                self._end_word()
                op = next(sep for sep in SEPARATORS if text.startswith(sep, self.pos))
                self.tokens.append(Op("sep", op))
                self.pos += len(op)
            elif char in "()":
                self._end_word()
                self.tokens.append(Op("group", char))
                self.pos += 1
            else:
                if char in "*?[" and self.glob_lead is None:
                    self.glob_lead = "".join(self.buf)
                if char == "{" and self.brace_lead is None:
                    self.brace_lead = "".join(self.buf)
                self._add(char)
                self.pos += 1
        self._end_word()

    def _add(self, text: str, *, quoted: bool = False) -> None:
        self.buf.append(text)
        self.in_word = True
        self.quoted = self.quoted or quoted

    def _end_word(self) -> None:
        if self.in_word:
            value = "".join(self.buf)
            self.tokens.append(Word(value, self.quoted, self._loose(value)))
        self.buf, self.in_word, self.quoted = [], False, False
        self.glob_lead = self.brace_lead = None

    def _loose(self, value: str) -> bool:
        """Could bash expand this word (a glob, braces) into a flag it does not
        spell? When the pattern starts the word, or follows a flag's name not yet
        ended by `=`: `*`, `?x`, `[-]*`, `--out*`, `-o*`, `{--output=x,HEAD}`;
        never `src/*`, nor `--grep=fix*` (that stays `--grep`, whatever its value)."""

        def open_lead(lead: str | None) -> bool:
            if lead is None:
                return False
            return not lead or (lead.startswith("-") and not (lead[:2] == "--" and "=" in lead))

        if open_lead(self.glob_lead):
            return True
        return open_lead(self.brace_lead) and LOOSE_BRACE.search(value) is not None

    def _escape(self) -> None:
        following = self.text[self.pos + 1 : self.pos + 2]
        if following == "\n":
            self.reasons.append("a line continuation (backslash-newline)")
        elif not following:
            self.reasons.append("a trailing backslash")
        else:
            self._add(following, quoted=True)
        self.pos += 2

    def _single(self) -> None:
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            self.reasons.append("an unbalanced single quote")
            self.pos += 1
            return
        self._add(self.text[self.pos + 1 : end], quoted=True)
        self.pos = end + 1

    def _double(self) -> None:
        text, start, kept = self.text, self.pos, len(self.buf)
        was = (self.in_word, self.quoted)
        self.pos += 1
        self._add("", quoted=True)
        while self.pos < len(text):
            char = text[self.pos]
            if char == '"':
                self.pos += 1
                return
            if char == "\\" and text[self.pos + 1 : self.pos + 2] in ("$", "`", '"', "\\", "\n"):
                self._escape()
            elif char == "$":
                self._dollar(in_quotes=True)
            elif char == "`":
                self._backtick()
            else:
                self._add(char)
                self.pos += 1
        self.reasons.append("an unbalanced double quote")
        del self.buf[kept:]
        self.in_word, self.quoted = was
        self.pos = start + 1  # read the rest as if the quote were not there

    def _dollar(self, *, in_quotes: bool) -> None:
        text, pos = self.text, self.pos
        following = text[pos + 1 : pos + 2]
        if following == "(":
            kind = (
                "arithmetic expansion" if text.startswith("((", pos + 1) else "command substitution"
            )
            self._substitution(pos + 1, kind)
        elif following == "{":
            end = _closing(text, pos + 1, "{", "}")
            inner = text[pos + 2 : (end or len(text) + 1) - 1]
            self._expansion(pos, end, "a ${...} parameter expansion", inner)
        elif following == "'" and not in_quotes:
            end = _closing_quote(text, pos + 2, "'", escapes=True)
            self._expansion(pos, end, "ANSI-C $'...' quoting", None)
        elif following and (following.isalnum() or following in "_@*#?$!-"):
            name = re.match(r"[A-Za-z_][A-Za-z0-9_]*|.", text[pos + 1 :]).group()
            self._expansion(pos, pos + 1 + len(name), f"the variable ${name}", None)
        else:
            self._add("$")
            self.pos += 1

    def _expansion(self, start: int, end: int | None, reason: str, inner: str | None) -> None:
        if end is None:
            self.reasons.append(f"an unterminated {reason}")
            end = len(self.text)
        self.reasons.append(f"{reason} (only known when it runs)")
        if inner:
            self.subcommands.append(inner)
        self._add(self.text[start:end])
        self.pos = end

    def _substitution(self, open_at: int, kind: str) -> None:
        end = _closing(self.text, open_at, "(", ")")
        inner = self.text[open_at + 1 : (end or len(self.text) + 1) - 1]
        if kind.startswith("arithmetic"):
            inner = inner[1:-1]
        self._expansion(open_at - 1, end, kind, inner)

    def _backtick(self) -> None:
        text, pos, inner = self.text, self.pos + 1, []
        while pos < len(text) and text[pos] != "`":
            if text[pos] == "\\" and pos + 1 < len(text):
                pos += 1
            inner.append(text[pos])
            pos += 1
        end = pos + 1 if pos < len(text) else None
        self._expansion(self.pos, end, "a backtick command substitution", "".join(inner))

    def _redirect(self) -> None:
        digits = "".join(self.buf) if self.text[self.pos] in "<>" else ""  # not before &>
        if self.in_word and not self.quoted and re.fullmatch(r"\d+|\{[A-Za-z_]\w*\}", digits):
            self.buf, self.in_word = [], False  # a file descriptor: 2>, {fd}>
        self._end_word()
        op = next(op for op in REDIRECTS if self.text.startswith(op, self.pos))
        if op in ("<<", "<<-"):
            self.reasons.append("a here-document")
        self.tokens.append(Op("redirect", op))
        self.pos += len(op)
        if op in (">&", "<&") and self.text.startswith("-", self.pos):
            self.tokens.append(Word("-", False))  # bash ends `>&-` here: `>&-rm` runs `rm`
            self.pos += 1


def _closing(text: str, start: int, opening: str, closing: str) -> int | None:
    """Index just past the bracket that closes the one at `start`, skipping
    quotes and escapes; None if it is never closed."""
    depth, pos = 0, start
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
            continue
        if char in "'\"":
            end = _closing_quote(text, pos + 1, char, escapes=char == '"')
            if end is None:
                return None
            pos = end
            continue
        depth += (char == opening) - (char == closing)
        pos += 1
        if depth == 0:
            return pos
    return None


def _closing_quote(text: str, pos: int, quote: str, *, escapes: bool) -> int | None:
    """Index just past the `quote` that ends a quoted string starting at `pos`."""
    while pos < len(text):
        if text[pos] == "\\" and escapes:
            pos += 2
        elif text[pos] == quote:
            return pos + 1
        else:
            pos += 1
    return None


def assemble(
    tokens: list[Word | Op], reasons: list[str]
) -> tuple[list[list[str]], list[set[int]], list[str], list[str]]:
    """Tokens → segments (as their words), each segment's loose words (`Word.loose`,
    by index), redirect targets, cd targets."""
    segments, loose, redirects, directories = [], [], [], []
    current: list[tuple[Word, bool]] = []  # (word, reserved words can start here)
    redirected = False  # after a redirect, bash reads no reserved word: `> x {` runs `{`
    piped = False  # after a pipe, `time` is /usr/bin/time, not the reserved word

    def close() -> None:
        words = list(current)
        while words and words[0][1] and words[0][0].value in RESERVED:
            words = words[2:] if words[0][0].value == "function" else words[1:]
        current.clear()
        if words:
            values = [word.value for word, _ in words]
            segments.append(values)
            loose.append({index for index, (word, _) in enumerate(words) if word.loose})
            directories.extend(_cd_target(values))

    index = 0
    while index < len(tokens):
        token = tokens[index]
        if isinstance(token, Word):
            pipeline_word = piped and token.value in ("time", "!")
            current.append((token, not token.quoted and not redirected and not pipeline_word))
        elif token.kind == "redirect":
            redirected = True
            target = tokens[index + 1] if index + 1 < len(tokens) else None
            if not isinstance(target, Word):
                reasons.append(f"a {token.text!r} redirect without a target")
            else:
                index += 1
                data = token.text in ("<<", "<<-", "<<<")
                dup = token.text in (">&", "<&") and FD_TARGET.fullmatch(target.value)
                if not data and not dup:
                    redirects.append(target.value)
        else:
            close()
            redirected, piped = False, token.text in ("|", "|&")
        index += 1
    close()
    return segments, loose, redirects, directories


def _cd_target(words: list[str]) -> list[str]:
    rest = command_words(words)
    if not rest or rest[0] not in ("cd", "pushd"):
        return []
    operands = [word for word in rest[1:] if not word.startswith(("-", "+"))]
    return [operands[0] if operands else "~"]


def without_assignments(words: list[str]) -> list[str]:
    index = 0
    while index < len(words) and ASSIGNMENT.match(words[index]):
        index += 1
    return words[index:]


def command_words(words: list[str]) -> list[str]:
    """A segment's words from its command on: no assignments, no `builtin`/`command`."""
    rest = without_assignments(words)
    while len(rest) > 1 and rest[0] in ("builtin", "command"):
        rest = rest[1:]
    return rest
