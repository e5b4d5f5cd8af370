"""mkdocs hooks (mkdocs.yml, `hooks:`): the generated reference pages, the
benchmark figures, and how-to pages that the nav does not name yet."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

# mkdocs loads this file by its path, with only its own folder on sys.path; the
# checkout's root makes `docsgen` a package here as it is in the tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docsgen import benchmarks, cli_page, http_page, settings_page  # noqa: E402

log = logging.getLogger("mkdocs.plugins.docsgen")
HOW_TO = "How-to"


def on_config(config: Any) -> Any:
    """A page under docs/how-to/ that the nav does not list joins the How-to
    section at its end, titled by its first heading: a helper's new page is in
    the site (and its search) before anyone edits mkdocs.yml."""
    docs = Path(config["docs_dir"])
    section = next((s for s in config["nav"] or [] if isinstance(s, dict) and HOW_TO in s), None)
    if section is None:
        return config
    listed = {_path(entry) for entry in section[HOW_TO]}
    for page in sorted((docs / "how-to").glob("*.md")):
        relative = page.relative_to(docs).as_posix()
        if relative not in listed:
            section[HOW_TO].append({_title(page): relative})
            log.info("docsgen: %s added to the How-to section (not named in mkdocs.yml)", relative)
    return config


def _path(entry: Any) -> str:
    return next(iter(entry.values())) if isinstance(entry, dict) else entry


def _title(page: Path) -> str:
    found = re.search(r"^# (.+)$", page.read_text(), re.MULTILINE)
    return found.group(1).strip() if found else page.stem.replace("-", " ").capitalize()


def on_files(files: Files, config: Any) -> Files:
    doc = http_page.document()
    generated = {
        "reference/settings.md": settings_page.page(),
        "reference/cli.md": cli_page.page(),
        "reference/http.md": http_page.page(doc),
        "reference/openapi.json": http_page.openapi_json(doc),
    }
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri.startswith("benchmarks/"):
        return benchmarks.render(markdown, Path(config["docs_dir"]) / "benchmarks")
    return markdown
