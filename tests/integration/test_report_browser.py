"""The HTML report in a real browser: headless Chromium (Debian's chromium-headless-shell or
chromium, driven by Playwright) opens the page of a tiny comparison; every figure loads and the
console stays clean. Skipped, with the reason, where Playwright or the browser is missing."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from fedloom.results.page import write_report
from tests.unit.results.test_report_page import add_financial_extras, tiny_comparison

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def browser_path() -> str | None:
    """The first headless-capable Chromium on PATH."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="playwright is not installed (pip)")
@pytest.mark.skipif(browser_path() is None, reason="no Chromium on PATH (apt-get install chromium-headless-shell)")
def test_every_figure_of_the_report_loads_in_headless_chromium(tmp_path: Path):
    from playwright.sync_api import sync_playwright

    root = tiny_comparison(tmp_path / "cmp", seeds=(0,), rounds=2)
    add_financial_extras(root / "seed0" / "rpa")
    page_file = write_report(root)
    figures = list((root / "figures").glob("*.png"))
    assert len(figures) >= 8

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path(), args=["--no-sandbox"])
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}"))
        page.goto(page_file.as_uri(), wait_until="load")
        widths = page.evaluate("Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
        browser.close()
    assert len(widths) == len(figures)  # one <img> per figure written
    assert all(w > 0 for w in widths), widths
    assert errors == []
