"""`make docs`: the site builds with `--strict` (a broken link, anchor or
reference fails it), every page is in it, and a how-to page that mkdocs.yml
does not name joins the nav rather than breaking the build. Pages are files
(`use_directory_urls: false`), so the site reads from disk: every link in it
names a file that exists."""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.docs.conftest import REPO, UNNAMED_PAGE, UNNAMED_TITLE, Built

pytestmark = pytest.mark.timeout(600)  # the build, on a busy machine


def test_the_site_builds_strict_without_a_warning(built_site: Built):
    assert "WARNING" not in built_site.output, built_site.output
    assert (built_site.site / "index.html").is_file()


def test_every_page_of_docs_is_built(built_site: Built):
    pages = [p.relative_to(REPO / "docs") for p in (REPO / "docs").rglob("*.md")]
    for page in pages:
        assert (built_site.site / page.with_suffix(".html")).is_file(), page


class Links(HTMLParser):
    """The href and src attributes of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in ("href", "src") and value]


def test_every_link_in_the_site_opens_a_file_from_disk(built_site: Built):
    """Opened from disk (file://), a link to a directory shows a directory listing,
    not its index.html: each relative link must name the file itself. 404.html is
    served by a web server only, from the site's root, so its links start at /."""
    site = built_site.site
    broken = []
    for page in site.rglob("*.html"):
        links = Links()
        links.feed(page.read_text())
        for link in links.found:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path:
                continue  # another site, or an anchor in this page
            start = site if parts.path.startswith("/") else page.parent
            if not (start / unquote(parts.path).lstrip("/")).resolve().is_file():
                broken.append(f"{page.relative_to(site)}: {link}")
    assert not broken, f"{len(broken)} links open no file, e.g. {broken[:5]}"


def test_a_how_to_page_nobody_named_joins_the_how_to_section(built_site: Built):
    built = built_site.site / Path(UNNAMED_PAGE).with_suffix(".html")
    assert built.is_file()
    home = (built_site.site / "index.html").read_text()
    assert UNNAMED_TITLE in home  # the nav every page carries names it


def test_make_docs_is_the_strict_build():
    target = subprocess.run(
        ["make", "-n", "docs"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"mkdocs build --strict", target), target
