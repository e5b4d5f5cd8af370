"""The approvals page in the system's headless Chromium (driven by selenium
through the system's chromedriver, as the docs' site is: tests/docs/): a
person signs in with a key, a call that starts to wait appears on the open
page by itself (the live stream), is approved there, and its batch finishes.
Without `chromium` and `chromedriver` on PATH these tests skip and say so.
Set TOOLRUN_TEST_DOCS_SCREENSHOTS to a directory to keep a screenshot of the
page with the call on it there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.page import waiting

pytestmark = [pytest.mark.timeout(600), pytest.mark.server]


# Skips the module without a browser:
from tests.support.browser import By, WebDriverWait, chromium  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as driver:
        yield driver


def _article(driver, batch_id: str):
    for article in driver.find_elements(By.CSS_SELECTOR, "article.call"):
        if article.get_attribute("data-batch") == batch_id:
            return article
    return None


def test_a_waiting_call_appears_is_approved_on_the_page_and_its_batch_finishes(
    gateway, keys, space, browser
):
    browser.get(f"{gateway.url}/approvals")
    WebDriverWait(browser, 60).until(lambda d: d.current_url.endswith("/approvals/sign-in"))
    browser.find_element(By.ID, "key").send_keys(keys["approver"])
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, 60).until(lambda d: "live" in d.find_element(By.ID, "live").text)
    assert browser.find_element(By.ID, "viewer").text == "test_page_in_a_browser-bob"

    batch_id = waiting(gateway, keys["submitter"], space)  # after the page opened
    article = WebDriverWait(browser, 60).until(lambda d: _article(d, batch_id))
    assert article.find_element(By.CSS_SELECTOR, ".tool").text == "write_file"
    assert "+ hi" in article.find_element(By.CSS_SELECTOR, ".diff-lines").text
    if folder := os.environ.get("TOOLRUN_TEST_DOCS_SCREENSHOTS"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / "approvals-page.png"))
    article.find_element(By.CSS_SELECTOR, "button.approve").click()
    WebDriverWait(browser, 60).until(
        lambda d: "approved by" in article.find_element(By.CSS_SELECTOR, ".outcome").text
    )

    with gateway.client(keys["submitter"]) as alice:
        state = alice.get(f"/v1/batches/{batch_id}", params={"wait": 60}).json()
    assert state["state"] == "ended"
    assert [r["status"] for r in state["results"]] == ["ok"]
    assert (space / "w.txt").read_text() == "hi"
    cookies = {c["name"]: c for c in browser.get_cookies()}
    assert cookies["toolrun_session"]["httpOnly"] and cookies["toolrun_session"]["secure"]
