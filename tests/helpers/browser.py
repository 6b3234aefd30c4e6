"""Headless Chromium on an MLflow UI page (the UI's tests and benchmarks/ui_screenshot.py): Debian's
Chromium driven by Playwright, each browser with a fresh, empty profile of its own, and the few
clicks the runs table needs. No TensorFlow here."""
from __future__ import annotations

import contextlib
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# nothing a fresh profile would fetch or sync on its own: the page's own requests only
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def need_chromium() -> None:
    """Skips the test unless Chromium and Playwright are installed (.ci/run installs both)."""
    import pytest

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium; .ci/run does)")
    pytest.importorskip("playwright.sync_api")


@contextlib.contextmanager
def chromium_page(width: int, height: int):
    """A page of headless Chromium at width x height, closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def close_assistant(page) -> None:
    """Close MLflow's Assistant panel where it is open (it takes a quarter of the width)."""
    close = page.get_by_role("button", name="Close", exact=True)
    if close.count():
        close.first.click()


def toggle_columns(page, names) -> None:
    """Click each of `names` in the runs table's Columns menu (shown ones hide, hidden ones show)."""
    page.get_by_role("button", name="Columns").click()
    for column in names:
        page.get_by_text(column, exact=True).last.click()
    page.keyboard.press("Escape")


def expand_parent_runs(page) -> None:
    """Expand every parent run (a sweep): its child runs (the jobs) appear under it."""
    for toggle in page.get_by_role("button", name="", exact=True).all():
        if toggle.is_visible() and toggle.bounding_box() and toggle.bounding_box()["x"] < 400:
            toggle.click()
