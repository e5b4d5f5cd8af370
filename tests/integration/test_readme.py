"""The examples of the README and of every page of the docs site, run as a
newcomer runs them (issue 11, point 9; issue 24).

Each document's fenced blocks, in order, in a folder of its own that holds what
a fresh checkout has after `make` (the README, that page, and the `.venv`) with
a HOME of its own: each ```sh block in one
bash (`toolrun up`, `toolrun trust .`, ..., `toolrun down`: a real stack), each
```python block as a script in that directory; a ```text block right after a
Python block is what the script prints (digits compared as "some number").
Each ```json block must parse, and one holding `permissions` must load as an
org policy file; each ```yaml block must parse. A block that cannot run here (a
provider SDK call needs an API key; the MCP servers do not exist) is tagged
`notest`, as in ```python notest, and reported as skipped with its line.
Blocks without a language are diagrams, synopses and output, not examples.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from runtime.gate.policy import PolicySources
from runtime.settings import Settings
from runtime.stack.embedded import stop_stack
from tests.support.cli import REPO

pytestmark = pytest.mark.timeout(180)

README = REPO / "README.md"
DOCUMENTS = [README, *sorted((REPO / "docs").rglob("*.md"))]
RUNS = {"sh", "python", "json", "yaml"}


@dataclass(frozen=True)
class Block:
    language: str
    line: int
    code: str
    notest: bool
    prints: str | None = None  # the ```text block that follows a Python block
    document: str = "README.md"  # its path in the checkout

    def __str__(self) -> str:
        return f"{self.document}:{self.line} {self.language}"


def fenced(text: str) -> list[tuple[int, str, list[str], str]]:
    """Every fenced block: (line of its opening fence, language, tags, code);
    the language is "" for a block without one."""
    found, opened, lines = [], None, []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"```(?!`)([^`]*)$", line)  # an info string holds no backtick
        if fence is None:
            lines.append(line)
        elif opened is None:
            words = fence.group(1).split()
            opened, lines = (number, words[0] if words else "", words[1:]), []
        else:
            found.append((*opened, "\n".join(lines) + "\n"))
            opened, lines = None, []
    return found


def blocks(text: str, document: str = "README.md") -> list[Block]:
    found: list[Block] = []
    previous = None  # (line of its closing fence, language) of the block before
    for line, language, tags, code in fenced(text):
        after_python = previous is not None and previous[1] == "python"
        if language == "text" and after_python and line - previous[0] <= 4:
            found[-1] = dataclasses.replace(found[-1], prints=code)  # "prints" between the two
        elif language in RUNS:
            found.append(Block(language, line, code, "notest" in tags, document=document))
        previous = (line + code.count("\n") + 1, language)
    return found


def document_blocks(path: Path) -> list[Block]:
    return blocks(path.read_text(), path.relative_to(REPO).as_posix())


BLOCKS = [block for path in DOCUMENTS for block in document_blocks(path)]


@pytest.fixture(scope="module")
def clones(tmp_path_factory):
    """For each document, a directory as a fresh checkout has it after `make`:
    the README, the page itself and the virtualenv; a HOME of its own for the
    user settings `toolrun trust` writes. A page's blocks share its directory
    (and the stack its `toolrun up` starts); pages do not share theirs."""
    made: dict[str, tuple[Path, dict[str, str]]] = {}

    def clone(document: str) -> tuple[Path, dict[str, str]]:
        if document not in made:
            folder = tmp_path_factory.mktemp("clone")
            (folder / "README.md").write_text(README.read_text())
            page = folder / document
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text((REPO / document).read_text())
            (folder / ".venv").symlink_to(Path(sys.prefix))
            (folder / "home").mkdir()
            env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
            env.pop("XDG_STATE_HOME", None)  # the stack lives under this HOME, as a user's
            env |= {"HOME": str(folder / "home"), "NO_COLOR": "1"}
            env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env['PATH']}"
            made[document] = folder, env
        return made[document]

    yield clone
    for folder, _ in made.values():
        # only if a block failed before `toolrun down`
        stop_stack(folder / "home" / ".local" / "state" / "toolrun")


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_readme_block(block: Block, clones):
    if block.notest:
        pytest.skip(f"{block} is tagged notest: {block.code.splitlines()[0][:60]}")
    folder, env = clones(block.document)
    if block.language == "json":
        check_json(block, folder)
        return
    if block.language == "yaml":
        assert list(yaml.safe_load_all(block.code)), f"{block} is empty"
        return
    if block.language == "sh":
        argv = ["bash", "-e", "-c", block.code]
    else:
        script = folder / f"example_{block.line}.py"
        script.write_text(block.code)
        argv = [sys.executable, script.name]
    done = subprocess.run(
        argv,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 0, f"{block} failed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    if block.prints is not None:
        assert numbers_as_such(done.stdout) == numbers_as_such(block.prints)


def check_json(block: Block, folder: Path) -> None:
    data = json.loads(block.code)
    if "permissions" in data:
        policy_file = folder / f"policy_{block.line}.json"
        policy_file.write_text(block.code)
        settings = Settings(policy_file=policy_file, user_settings_file=folder / "none.json")
        PolicySources(settings)  # an invalid rule or key is a ConfigurationError


def numbers_as_such(text: str) -> list[str]:
    return [re.sub(r"\d+", "N", line.rstrip()) for line in text.strip().splitlines()]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_example_hides_in_a_block_without_a_language(path: Path):
    """A block without a language is a diagram, a synopsis or output; Python
    there would be an example that no test runs."""
    untagged = [code for _, language, _, code in fenced(path.read_text()) if not language]
    assert not [code for code in untagged if re.match(r"(from|import) \w", code)]


def test_the_readme_keeps_its_quick_start_runnable():
    """The blocks this module runs hold the stack's shell lines and the first
    Python example with the output it must print, and no Python hides in a
    block without a language: a README does not pass by running less."""
    untagged = [code for _, language, _, code in fenced(README.read_text()) if not language]
    assert not [code for code in untagged if re.match(r"(from|import) \w", code)]
    runs = [b for b in BLOCKS if not b.notest and b.document == "README.md"]
    shell = "\n".join(b.code for b in runs if b.language == "sh")
    for line in ("toolrun up", "toolrun trust .", "toolrun down"):
        assert line in shell
    first = next(b for b in runs if b.language == "python")
    assert "rt.submit(" in first.code and first.prints is not None


def test_the_readme_stays_short_and_points_into_the_site():
    """The README is the way in, not the manual (issue 24): the rest is in docs/."""
    text = README.read_text()
    assert len(text.splitlines()) < 150
    linked = set(re.findall(r"\]\((docs/[^)#]+)", text))
    assert linked, "the README links into the docs"
    assert all((REPO / path).is_file() for path in linked), linked


def test_the_sample_output_counts_the_readme_s_own_lines():
    """The blocks above compare digits as "some number", so a sample that says how
    many lines README.md has is checked here: it must be what the reader's
    read_file will say."""
    lines = len(README.read_text().splitlines())
    said = [
        (block.document, found)
        for path in DOCUMENTS
        for block in document_blocks(path)
        if block.prints
        for found in re.findall(r"read README\.md \(lines 1-(\d+) of (\d+)\)", block.prints)
    ]
    assert said, "no sample output reads README.md"
    for document, (last, total) in said:
        assert (int(last), int(total)) == (lines, lines), f"{document} says {total}, not {lines}"
