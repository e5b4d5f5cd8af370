"""The built site, looked at: served over HTTP, and opened from disk (file://) as
the README says, in the system's headless Chromium (driven by selenium through
the system's chromedriver; no browser is ever downloaded). The navigation reaches
every page, every page renders its title, and the search (served) finds
"approval". Without `chromium` and `chromedriver` on PATH (Debian: `apt-get
install chromium chromium-driver`) these tests skip and say so.

Set TOOLRUN_TEST_DOCS_SCREENSHOTS to a directory to keep a screenshot of each
page there."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

from tests.docs.conftest import Built

pytestmark = [pytest.mark.timeout(600), pytest.mark.server]  # a web server and a browser


# Skips the module without a browser:
from tests.support.browser import By, WebDriverWait, chromium, expected_conditions  # noqa: E402


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def served(built_site: Built) -> Iterator[str]:
    handler = functools.partial(Quiet, directory=str(built_site.site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium(width=1280, height=900) as driver:
        yield driver


def built_pages(site: Path) -> set[str]:
    """Each page the build made, as its path under the site's root (404.html is
    a web server's page, not the navigation's)."""
    pages = set()
    for html in site.rglob("*.html"):
        relative = html.relative_to(site).as_posix()
        if not relative.startswith(("assets", "search", "404.html")):
            pages.add(relative)
    return pages


def nav_links(driver, base: str) -> set[str]:
    """The pages the navigation links to, as paths under `base` (the site's root)."""
    found = set()
    for link in driver.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link"):
        href = link.get_attribute("href")
        if href and href.startswith(base):
            found.add(urlparse(href).path.removeprefix(urlparse(base).path))
    return found


def screenshot(driver, name: str) -> None:
    folder = os.environ.get("TOOLRUN_TEST_DOCS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(
            str(Path(folder) / f"{name.strip('/').replace('/', '_') or 'home'}.png")
        )


@pytest.fixture(scope="module")
def on_disk(built_site: Built) -> str:
    return built_site.site.as_uri() + "/"


@pytest.mark.parametrize("root", ["served", "on_disk"])
def test_the_navigation_reaches_every_page_and_each_renders(root, request, browser, built_site):
    base = request.getfixturevalue(root)
    browser.get(urljoin(base, "index.html"))
    reached = nav_links(browser, base)
    missing = built_pages(built_site.site) - reached
    assert not missing, f"pages no navigation link reaches: {sorted(missing)}"
    for page in sorted(reached):
        browser.get(urljoin(base, page))
        WebDriverWait(browser, 60).until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "article h1"))
        )
        title = browser.find_element(By.CSS_SELECTOR, "article h1").text
        assert title and "404" not in browser.title, page
        screenshot(browser, f"{root}-{page}")


def test_the_search_finds_approval(served, browser):
    browser.get(urljoin(served, "?q=approval"))  # Material opens its search with ?q=
    results = WebDriverWait(browser, 90).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
    )
    screenshot(browser, "search-approval")
    links = [
        a.get_attribute("href")
        for a in browser.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")
    ]
    assert results
    assert any("concepts/approvals.html" in (href or "") for href in links), links
