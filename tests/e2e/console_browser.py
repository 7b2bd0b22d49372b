"""Debian's Chromium, headless, driven through chromium-driver with Selenium: what the console's
test needs of a browser (waiting for the page, dropping files on it, screenshots)."""

from __future__ import annotations

import base64
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.alert import Alert
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Without the background-networking flags Chromium reaches for Google's services, and on a
# closed network its connections are then refused.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
WAIT_S = 30.0

T = TypeVar("T")

# Drops files on an element as a user's drag and drop does: a DataTransfer holding them, in a
# `drop` event (after `dragenter` and `dragover`), so the page's own drop handler runs.
DROP_SCRIPT = """
const [target, files] = arguments;
const transfer = new DataTransfer();
for (const file of files) {
  const bytes = Uint8Array.from(atob(file.base64), (c) => c.charCodeAt(0));
  transfer.items.add(new File([bytes], file.name, {type: file.type}));
}
for (const type of ["dragenter", "dragover", "drop"]) {
  const init = {bubbles: true, cancelable: true, dataTransfer: transfer};
  target.dispatchEvent(new DragEvent(type, init));
}
"""


class Browser:
    """One headless Chromium with a fresh profile; screenshots go to `shots`, numbered."""

    def __init__(self, driver: webdriver.Chrome, base_url: str, shots: Path) -> None:
        self.driver = driver
        self.base_url = base_url
        self.shots = shots
        self._taken = 0

    def open(self, path: str) -> None:
        """Loads a page of the API's origin."""
        self.driver.get(self.base_url + path)

    def find(self, css: str) -> WebElement:
        """The element `css` selects, waited for until it is displayed."""
        return self.wait(lambda: self._displayed(css), f"{css} displayed")

    def finds(self, css: str) -> list[WebElement]:
        """Every element `css` selects now."""
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def _displayed(self, css: str) -> WebElement | None:
        for element in self.driver.find_elements(By.CSS_SELECTOR, css):
            if element.is_displayed():
                return element
        return None

    def text(self, css: str) -> str:
        """The displayed text of the element `css` selects (waited for; read again if the
        page redrew it meanwhile)."""

        def probe() -> str | None:
            element = self._displayed(css)
            return None if element is None else str(element.text)

        return self.wait(probe, f"{css} displayed")

    def attribute(self, css: str, name: str) -> str:
        """An attribute of the element `css` selects (waited for, read again if redrawn)."""

        def probe() -> str | None:
            element = self._displayed(css)
            return None if element is None else element.get_attribute(name)

        return self.wait(probe, f"{css} with {name}")

    def wait(self, probe: Callable[[], T | None], what: str, timeout: float = WAIT_S) -> T:
        """Polls `probe` until it gives something truthy; fails naming `what` and the page's
        notice after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = probe()
            except (NoSuchElementException, StaleElementReferenceException):
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"waited {timeout:.0f} s for {what}; notice: {self.notice()!r}"
                )
            time.sleep(0.1)

    def wait_text(self, css: str, needle: str, timeout: float = WAIT_S) -> str:
        """Waits until the element `css` selects shows `needle`; its text."""

        def probe() -> str | None:
            element = self._displayed(css)
            return element.text if element is not None and needle in element.text else None

        return self.wait(probe, f"{needle!r} in {css}", timeout)

    def notice(self) -> str:
        """The page's notice line (the last action's outcome or error), or ""."""
        for element in self.driver.find_elements(By.ID, "notice-text"):
            if element.is_displayed():
                return str(element.text)
        return ""

    def wait_notice(self, needle: str, timeout: float = WAIT_S) -> str:
        """Waits until the notice line shows `needle`; its text."""

        def probe() -> str | None:
            text = self.notice()
            return text if needle in text else None

        return self.wait(probe, f"{needle!r} in the notice", timeout)

    def fill(self, css: str, value: str) -> None:
        """Types into a field, replacing what it held."""
        field = self.find(css)
        field.clear()
        field.send_keys(value)

    def click(self, css: str) -> None:
        """Clicks the element `css` selects, once it is displayed and enabled."""
        self.wait(
            lambda: (e := self._displayed(css)) is not None and e.is_enabled(), f"{css} enabled"
        )
        self.find(css).click()

    def drop_files(self, css: str, files: list[tuple[str, bytes, str]]) -> None:
        """Drops files (name, bytes, media type) on the element `css` selects."""
        payload = [
            {"name": name, "base64": base64.b64encode(data).decode(), "type": media_type}
            for name, data, media_type in files
        ]
        self.driver.execute_script(DROP_SCRIPT, self.find(css), payload)

    def accept_confirmation(self) -> None:
        """Answers OK to the page's confirmation dialog."""
        alert = self.wait(self._alert, "a confirmation dialog")
        alert.accept()

    def _alert(self) -> Alert | None:
        try:
            return self.driver.switch_to.alert
        except WebDriverException:
            return None

    def screenshot(self, name: str) -> Path:
        """Saves the whole page as `NN-name.png` in the screenshots folder."""
        self._taken += 1
        path = self.shots / f"{self._taken:02d}-{name}.png"
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(1400, max(1000, min(int(height) + 40, 6000)))
        assert self.driver.save_screenshot(str(path)), path
        return path

    def console_errors(self) -> list[str]:
        """The page's console messages at level SEVERE (script errors, refused loads)."""
        # Selenium leaves this one unannotated.
        entries: list[dict[str, Any]] = self.driver.get_log("browser")  # type: ignore[no-untyped-call]
        return [str(e["message"]) for e in entries if e.get("level") == "SEVERE"]


@contextmanager
def chromium(base_url: str, shots: Path) -> Iterator[Browser]:
    """Headless Chromium from Debian's packages, with a fresh profile, closed afterwards."""
    profile = Path(tempfile.mkdtemp(prefix="ragline-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.set_script_timeout(WAIT_S)
        yield Browser(driver, base_url, shots)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
