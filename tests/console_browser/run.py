"""`warden console` in a real browser: headless Chromium (Debian's package) driven by Selenium
through the system chromedriver. A real agent (agent.py, on the Python binding) blocks on an
approval; a person logs in with a token, sees the request with its diff, approves it, and the
agent's call proceeds; then resolves an AMBIGUOUS effect and opens the verified receipt chain.

    python run.py --warden BIN --agent-python PY --screenshots DIR [--work DIR]

Every page is saved as a PNG under --screenshots. Prints one line per check and, last,
`N passed, M failed`; exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import base64
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

HERE = Path(__file__).resolve().parent


class Lines:
    """A child's stdout, line by line, read by a thread so waits can time out."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        stream = process.stdout

        def pump() -> None:
            for line in stream:
                self.queue.put(line.rstrip("\n"))

        threading.Thread(target=pump, daemon=True).start()

    def wait_for(self, prefix: str, timeout: float) -> str:
        while True:
            try:
                line = self.queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line starting {prefix!r} within {timeout} s; saw {self.seen}") from None
            self.seen.append(line)
            if line.startswith(prefix):
                return line


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warden", required=True)
    parser.add_argument("--agent-python", required=True)
    parser.add_argument("--screenshots", required=True, type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    options = parser.parse_args()
    work = options.work or Path(tempfile.mkdtemp(prefix="console-browser-"))
    work.mkdir(parents=True, exist_ok=True)
    shots = options.screenshots
    shots.mkdir(parents=True, exist_ok=True)
    store = work / "state.redb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDEN_") or k == "WARDEN_LIB"}

    passed: list[str] = []
    failed: list[str] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        (passed if ok else failed).append(name)
        print(f"{'ok  ' if ok else 'FAIL'} {name}{'' if ok else ': ' + detail}", flush=True)

    agent = subprocess.Popen(
        [options.agent_python, str(HERE / "agent.py"), str(work)], stdout=subprocess.PIPE, text=True, env=env
    )
    console: subprocess.Popen[str] | None = None
    driver = None
    try:
        agent_lines = Lines(agent)
        agent_lines.wait_for("READY", 60)
        request_id = agent_lines.wait_for("PENDING ", 30).split()[1]
        added = subprocess.run(
            [options.warden, "approvers", "add", "bob", "--store", str(store)],
            capture_output=True, text=True, env=env, check=True,
        )
        token = added.stdout.strip().splitlines()[-1]
        console = subprocess.Popen(
            [options.warden, "console", "--store", str(store), "--config", str(work / "warden.yaml")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )
        assert console.stdout is not None
        url = console.stdout.readline().strip().rstrip("/")
        check("the console prints its URL first", url.startswith("http://127.0.0.1:"), url)

        chrome = webdriver.ChromeOptions()
        chrome.binary_location = options.chromium
        for flag in (
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-', dir=work)}",
            "--window-size=1200,900", "--force-device-scale-factor=1",
        ):
            chrome.add_argument(flag)
        # JavaScript off: every page must work without it (the console ships none).
        chrome.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
        driver = webdriver.Chrome(service=Service(executable_path=options.chromedriver), options=chrome)
        driver.set_page_load_timeout(30)

        def shot(name: str) -> None:
            # The whole page, not the viewport: Chromium's own capture beyond the viewport.
            size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 4000), "scale": 1}
            data = driver.execute_cdp_cmd(
                "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
            )["data"]
            (shots / f"{name}.png").write_bytes(base64.b64decode(data))

        def body() -> str:
            return driver.find_element(By.TAG_NAME, "body").text

        def follow(element: WebElement) -> None:
            """Click a button or link and wait until the page it leads to replaced this one (a
            click returns before the navigation starts; the next command then waits for it)."""
            old = driver.find_element(By.TAG_NAME, "html")
            element.click()
            WebDriverWait(driver, 30).until(expected_conditions.staleness_of(old))

        driver.get(f"{url}/")
        check("without a session the inbox sends you to sign in", driver.current_url.endswith("/login"), driver.current_url)
        shot("01-login")
        driver.find_element(By.NAME, "token").send_keys(token)
        follow(driver.find_element(By.CSS_SELECTOR, "form[action='/login'] button"))
        text = body()
        check("the token logs in and lands on the inbox", "Inbox" in text and "console:bob" in text, text[:300])
        card = driver.find_element(By.CSS_SELECTOR, f'section[id="{request_id}"]')
        card_text = card.text
        check("the pending request is shown whole", all(s in card_text for s in ("400000", "pay_2002", "support-agent for ada")), card_text)
        check("agent text is shown as text, not run", "<script>alert('agent text')</script>" in card_text, card_text)
        changed = card.find_elements(By.CSS_SELECTOR, "tr.changed")
        check(
            "the diff marks what changed since the last approved refund",
            len(changed) == 3 and "120000" in changed[0].text and "changed" in changed[0].text,
            card_text,
        )
        shot("02-inbox")
        follow(card.find_element(By.CSS_SELECTOR, "button.approve"))
        text = body()
        check("approve lands on the request, granted", "granted" in text and request_id in text, text[:300])
        shot("03-approved")
        proceeded = agent_lines.wait_for("PROCEEDED", 60)
        check("the agent's blocked call proceeds", proceeded.startswith("PROCEEDED re_"), proceeded)

        driver.get(f"{url}/effects")
        effect = driver.find_element(By.CSS_SELECTOR, 'section[id="effect-refund:pay_3003"]')
        check("the AMBIGUOUS effect is listed first", "ambiguous" in effect.text, effect.text)
        shot("04-effects")
        effect.find_element(By.CSS_SELECTOR, 'input[value="committed"]').click()
        effect.find_element(By.NAME, "reason").send_keys("refund re_2 is in the provider's dashboard")
        follow(effect.find_element(By.CSS_SELECTOR, "button.primary"))
        text = body()
        check("resolve moves it to committed, naming who and why", "is now committed" in text and "console:bob" in text, text[:300])
        shot("05-resolved")
        listed = subprocess.run(
            [options.warden, "effects", "--state", "ambiguous", "--store", str(store)],
            capture_output=True, text=True, env=env,
        )
        check("the CLI agrees: no AMBIGUOUS effect is left", "no ambiguous effects" in listed.stdout, listed.stdout + listed.stderr)

        driver.get(f"{url}/receipts")
        text = body()
        check("the receipts page shows the chain verified", "Chain verified" in text, text[:300])
        shot("06-receipts")
        follow(driver.find_element(By.CSS_SELECTOR, 'a[href^="/receipt/"]'))
        text = body()
        check("one receipt's whole document", "prev_hash" in text and "action_hash" in text, text[:300])
        shot("07-receipt")
        driver.get(f"{url}/authority")
        shot("08-authority")
    except Exception as error:  # noqa: BLE001 - any failure is reported as one, with its type
        check("the scenario ran to its end", False, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    finally:
        if driver is not None:
            driver.quit()
        for process in (console, agent):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
    print(f"console browser: {len(passed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
