"""The reference pages are generated from the code, and this checks that they
hold all of it: a setting, a `toolrun` command or an HTTP route that exists in
the code and not in the built reference fails here, as does a public name the
Python API page leaves out."""

from __future__ import annotations

import html
import re

import pytest
from fastapi.routing import APIRoute

import runtime
from docsgen import cli_page, http_page, settings_page
from runtime.settings import Settings
from tests.docs.conftest import REPO, Built
from tests.integration.test_readme import fenced

pytestmark = pytest.mark.timeout(600)  # the build, on a busy machine


def _page(built: Built, name: str) -> str:
    return html.unescape((built.site / "reference" / f"{name}.html").read_text())


def test_every_setting_is_in_the_reference_with_its_description(built_site: Built):
    page = _page(built_site, "settings")
    for name, field in Settings.model_fields.items():
        assert field.description, f"Settings.{name} has no description for the reference"
        assert settings_page.variable(name) in page, name
        first_words = " ".join(field.description.split()[:4])
        assert re.sub(r"`", "", first_words) in re.sub(r"<[^>]+>", "", page), name


def test_every_command_is_in_the_reference(built_site: Built):
    page = re.sub(r"<[^>]+>", "", _page(built_site, "cli"))
    found = list(cli_page.commands())
    assert len(found) > 20
    for path, command in found[1:]:
        assert path in page, path
        for param in command.params:
            if not cli_page.is_argument(param) and not param.hidden:
                assert param.opts[0] in page, (path, param.opts[0])


def _api_routes(routes: list, prefix: str = "") -> list[tuple[str, str]]:
    """(method, path) of every route the app answers, through included routers
    (FastAPI 0.16x keeps an included router whole, as `original_router`)."""
    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            found += [(method, prefix + route.path) for method in route.methods]
        elif hasattr(route, "original_router"):
            inner = prefix + (getattr(route.include_context, "prefix", "") or "")
            found += _api_routes(route.original_router.routes, inner)
    return found


def test_every_route_is_in_the_reference(built_site: Built):
    page = re.sub(r"<[^>]+>", "", _page(built_site, "http"))
    with http_page.gateway_app() as app:
        routes = _api_routes(app.routes)
    assert len(routes) > 10
    for method, path in routes:
        assert f"{method} {path}" in page, (method, path)


def test_every_public_name_is_on_the_python_api_page(built_site: Built):
    source = (REPO / "docs" / "reference" / "python.md").read_text()
    documented = {
        line.split()[-1].rsplit(".", 1)[-1]
        for line in source.splitlines()
        if line.startswith("::: ")
    }
    assert set(runtime.__all__) <= documented, set(runtime.__all__) - documented
    page = _page(built_site, "python")
    for name in runtime.__all__:
        assert name in page, name


def test_every_public_method_of_the_runtime_and_its_handles_is_on_the_page(built_site: Built):
    """mkdocstrings leaves out a member without a docstring: `asubmit_message`
    was missing so (issue 41), and the page is where a newcomer looks."""
    import inspect

    from runtime.client import Runtime
    from runtime.client.handle import AsyncBatchHandle, BatchHandle

    anchors = set(re.findall(r'id="([^"]+)"', _page(built_site, "python")))
    for cls in (Runtime, BatchHandle, AsyncBatchHandle):
        prefix = f"{cls.__module__}.{cls.__name__}".replace(".runtime.Runtime", ".Runtime")
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") or not callable(member) and not isinstance(member, property):
                continue
            assert f"{prefix}.{name}" in anchors, f"{cls.__name__}.{name}"
    for name in ("from_env", "deny", "approve", "asubmit_message"):
        assert f"runtime.client.Runtime.{name}" in anchors, name
    for name in ("approve", "deny", "format"):
        assert f"runtime.client.handle.BatchHandle.{name}" in anchors, name


# The other way round: what the pages name must exist, or a reader types a setting
# or a command that is not there.

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _named_commands(text: str) -> set[str]:
    """`toolrun X` in code spans, and command lines of fenced blocks."""
    found = set(re.findall(r"`toolrun ([a-z][a-z-]*)", text))
    for _, language, _, code in fenced(text):
        if language in ("", "sh"):
            found |= set(re.findall(r"^\s*(?:\$ )?toolrun ([a-z][a-z-]*)", code, re.MULTILINE))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_setting_and_command_a_page_names_exists(page):
    text = page.read_text()
    settings = {settings_page.variable(name) for name in Settings.model_fields}
    named = set(re.findall(r"TOOLRUN_[A-Z0-9_]*[A-Z0-9]", text))
    unknown = {name for name in named - settings if not name.startswith("TOOLRUN_TEST_")}
    assert not unknown, f"{page.name} names settings that do not exist: {sorted(unknown)}"
    commands = {path.split()[1] for path, _ in list(cli_page.commands())[1:]}
    missing = _named_commands(text) - commands
    assert not missing, f"{page.name} names commands that do not exist: {sorted(missing)}"
