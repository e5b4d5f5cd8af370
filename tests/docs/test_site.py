"""`make docs`: the site builds with `--strict` (a broken link, anchor or
reference fails it), every page is in it, and a how-to page that mkdocs.yml
does not name joins the nav rather than breaking the build."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.docs.conftest import REPO, UNNAMED_PAGE, UNNAMED_TITLE, Built

pytestmark = pytest.mark.timeout(600)  # the build, on a busy machine


def test_the_site_builds_strict_without_a_warning(built_site: Built):
    assert "WARNING" not in built_site.output, built_site.output
    assert (built_site.site / "index.html").is_file()


def test_every_page_of_docs_is_built(built_site: Built):
    pages = [p.relative_to(REPO / "docs") for p in (REPO / "docs").rglob("*.md")]
    for page in pages:
        stem = page.with_suffix("")
        html = "index.html" if stem.name == "index" else f"{stem.name}/index.html"
        assert (built_site.site / stem.parent / html).is_file(), page


def test_a_how_to_page_nobody_named_joins_the_how_to_section(built_site: Built):
    built = built_site.site / Path(UNNAMED_PAGE).with_suffix("") / "index.html"
    assert built.is_file()
    home = (built_site.site / "index.html").read_text()
    assert UNNAMED_TITLE in home  # the nav every page carries names it


def test_make_docs_is_the_strict_build():
    target = subprocess.run(
        ["make", "-n", "docs"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"mkdocs build --strict", target), target
