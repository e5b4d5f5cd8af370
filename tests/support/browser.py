"""The system's headless Chromium, driven by selenium through the system's
chromedriver (no browser is ever downloaded), for the tests that look at a
page: the docs site (tests/docs/) and the approvals page (tests/gateway/).
A module that imports this skips, and says why, without `chromium` and
`chromedriver` on PATH (Debian: `apt-get install chromium chromium-driver`)
or without selenium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip(
        "no system chromium and chromedriver (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

__all__ = ["By", "WebDriverWait", "chromium", "expected_conditions"]


@contextmanager
def chromium(**size: int) -> Iterator[webdriver.Chrome]:
    """A headless Chromium (`width`, `height`: its window), quit after."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    if size:
        options.add_argument(f"--window-size={size['width']},{size['height']}")
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
