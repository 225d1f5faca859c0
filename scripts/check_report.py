"""Open a gpubench report in headless Chromium as a person would, and check it.

    PYTHONPATH=. python scripts/check_report.py results/<run>/report.html [--screenshot PNG]

Drives Debian's chromium over the DevTools protocol on a pipe (--remote-debugging-pipe: no port,
no websocket library). Checks that the page loads, that it holds one script (the report's table
sorter) and no script opened a dialog, that every <img> loaded (complete, with a natural width),
that no request left the report's folder (only file: URLs under it and data:
URIs), that no script error or Content-Security-Policy violation was logged, and that clicking a
table heading sorts the table. Saves a full-page screenshot. Prints a summary; exit status 0 when
every check passed, 1 when one failed, 2 when chromium is missing.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--window-size=1400,1000",
    "--remote-debugging-pipe",
]
TIMEOUT_S = 60.0

IMAGES_JS = """JSON.stringify(Array.from(document.images).map(function (i) {
  return {src: i.getAttribute("src"), complete: i.complete, width: i.naturalWidth};
}))"""

# Click the first sortable table's last sortable heading twice; report the column before and
# after each click, so the caller can see ascending then descending order.
SORT_JS = """(function () {
  var t = document.querySelector("table.sortable");
  if (!t) return JSON.stringify(null);
  var th = t.tHead.rows[0].cells[0];
  var col = function () { return Array.from(t.tBodies[0].rows).map(function (r) {
    return r.cells[0].textContent; }); };
  var before = col(); th.click(); var up = col(); th.click(); var down = col();
  return JSON.stringify({before: before, up: up, down: down});
})()"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """A headless Chromium and one page session, spoken to over the DevTools pipe."""

    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="gpubench-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child: the protocol wants fds 3 (in) and 4 (out)
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            pass_fds=(3, 4),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a command and wait for its answer, keeping the events that arrive meanwhile."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def wait_for(self, method: str, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        seen = len(self.events)
        for e in self.events[:seen]:
            if e.get("method") == method:
                return e
        while time.monotonic() < deadline:
            event = self._read(deadline - time.monotonic())
            self.events.append(event)
            if event.get("method") == method:
                return event
        raise TimeoutError(f"no {method} within {timeout_s} s")

    def _read(self, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        import select

        deadline = time.monotonic() + timeout_s
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_chrome], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe (did it crash?)")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(raw))

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return json.loads(result["result"]["value"])

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):  # already gone
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


@dataclass
class Check:
    """What the browser saw: the findings, and the failures among them (empty when all is well)."""

    report: str
    title: str = ""
    images: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    scripts: int = 0
    screenshot: str | None = None
    page_height_px: int | None = None


def check(report: Path, screenshot: Path | None, executable: str) -> Check:
    """Load `report` in Chromium, run every check, and save a full-page screenshot."""
    report = report.resolve()
    folder = report.parent.as_uri() + "/"
    out = Check(str(report))
    browser = Browser(executable)
    try:
        targets = browser.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        browser.session = browser.send(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            browser.send(f"{domain}.enable")
        browser.events.clear()
        browser.send("Page.navigate", {"url": report.as_uri()})
        browser.wait_for("Page.loadEventFired")
        out.title = browser.evaluate("JSON.stringify(document.title)")
        out.scripts = browser.evaluate("JSON.stringify(document.scripts.length)")
        out.images = browser.evaluate(IMAGES_JS)
        metrics = browser.send("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        out.page_height_px = int(size["height"])
        if screenshot is not None:
            shot = browser.send(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {
                        "x": 0,
                        "y": 0,
                        "width": size["width"],
                        "height": size["height"],
                        "scale": 1,
                    },
                },
            )
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            out.screenshot = str(screenshot)
        sort = browser.evaluate(SORT_JS)  # after the screenshot: sorting changes the page
    finally:
        browser.close()
    _judge(out, browser.events, folder, sort)
    return out


def _judge(out: Check, events: list[dict[str, Any]], folder: str, sort: Any) -> None:
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            out.requests.append(url[:80])
            if not (url.startswith("data:") or url.startswith(folder)):
                out.failures.append(f"request outside the report's folder: {url[:200]}")
        elif method == "Network.loadingFailed":
            out.failures.append(f"a resource failed to load: {params.get('errorText')}")
        elif method == "Page.javascriptDialogOpening":
            out.failures.append(f"a script opened a dialog: {params.get('message')!r}")
        elif method == "Runtime.exceptionThrown":
            out.console_errors.append(str(params["exceptionDetails"].get("text")))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            out.console_errors.append(str(params["entry"].get("text"))[:300])
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            out.console_errors.append(str(params.get("args"))[:300])
    out.failures += [f"console error: {m}" for m in out.console_errors]
    if out.scripts != 1:
        out.failures.append(f"the page has {out.scripts} scripts; the report has one (the sorter)")
    if not out.images:
        out.failures.append("the page has no images")
    out.failures += [
        f"image did not load: {i['src']}" for i in out.images if not i["complete"] or not i["width"]
    ]
    if sort is None:
        out.failures.append("the page has no sortable table")
    elif len(sort["before"]) > 1 and (
        sort["up"] != sorted(sort["up"], key=_sort_key)
        or sort["down"] != sorted(sort["down"], key=_sort_key, reverse=True)
    ):
        out.failures.append("clicking a table heading did not sort the table")


def _sort_key(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text.replace(",", "")), "")
    except ValueError:
        return (1, 0.0, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a report.html")
    parser.add_argument("--screenshot", type=Path, help="where to save a full-page PNG")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"check_report: no such file {str(args.report)!r}", file=sys.stderr)
        return 2
    executable = find_chromium()
    if executable is None:
        print("check_report: chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    if args.screenshot is None and os.environ.get("OUT"):
        args.screenshot = Path(os.environ["OUT"]) / "report_screenshot.png"
    result = check(args.report, args.screenshot, executable)
    if args.json:
        print(json.dumps(result.__dict__, indent=2))
    else:
        loaded = sum(1 for i in result.images if i["complete"] and i["width"])
        print(f"report:      {result.report}")
        print(f"title:       {result.title}")
        print(f"images:      {loaded}/{len(result.images)} loaded")
        print(
            f"requests:    {len(result.requests)} (all inside the report's folder or data:)"
            if not any("request outside" in f for f in result.failures)
            else f"requests:    {len(result.requests)}, some outside the report's folder"
        )
        print(f"screenshot:  {result.screenshot} ({result.page_height_px} px tall)")
        for f in result.failures:
            print(f"FAIL: {f}")
        verdict = f"{len(result.failures)} failures" if result.failures else "ok"
        print(f"result:      {verdict}")
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
