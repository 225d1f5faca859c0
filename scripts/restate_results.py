"""Restate the published results: each committed run folder rewritten into today's schema
(nothing re-measured; the rewrite recorded in its restated.json), and with --render every
published report and the README's images drawn again with the current code.

    PYTHONPATH=. python scripts/restate_results.py                  # rewrite results/20261122-*
    PYTHONPATH=. python scripts/restate_results.py --render         # ... and re-render reports
    PYTHONPATH=. python scripts/restate_results.py --render --verdict-png docs/verdict.png

--render re-renders each folder's report.html and plots/ (those are the README's chart images:
results/20261122-h100-report/plots/throughput.png and speedup.png), the combined report
results/20261122-h100-report of the H100's GPU and CPU runs (as scripts/gpu_publish.sh made it;
that folder holds no rows of its own), and, with --verdict-png, the README's screenshot of a
report's verdict section, taken in headless Chromium (apt-get install chromium) from
--verdict-report (default: the 2-core CPU quick run's report). Prints per folder the rows and
the columns that changed; exit status 0, or 2 when chromium is missing for --verdict-png.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # check_report: the Chromium driver

from check_report import Browser, find_chromium  # noqa: E402

from gpubench.report import build_report  # noqa: E402
from gpubench.store.env import git_commit  # noqa: E402
from gpubench.store.restate import restate  # noqa: E402

PUBLISHED = sorted((ROOT / "results").glob("20261122-*"))
# Reports of several runs: the folder, and the run folders it is drawn from (gpu_publish.sh).
COMBINED = {"20261122-h100-report": ("20261122-h100-gpu", "20261122-h100-cpu")}
WIDTH_PX = 1050
VERDICT_REPORT = ROOT / "results" / "20261122-cpu-quick" / "report.html"

# The verdict section's box: from its heading to the caption that says how it was judged.
VERDICT_BOX_JS = """(function () {
  var h = Array.from(document.querySelectorAll("h2")).find(function (e) {
    return e.textContent.trim() === "Verdict"; });
  if (!h) return JSON.stringify(null);
  var end = h, e = h.nextElementSibling;
  while (e && e.tagName !== "H2") { end = e; e = e.nextElementSibling; }
  var top = h.getBoundingClientRect().top + window.scrollY;
  var bottom = end.getBoundingClientRect().bottom + window.scrollY;
  var box = h.parentElement.getBoundingClientRect();
  return JSON.stringify({x: box.left, y: top, width: box.width, height: bottom - top});
})()"""


def restate_all(folders: list[Path]) -> None:
    """Rewrite every folder that has rows; print what changed in each."""
    commit = git_commit()  # before the first rewrite: after it the checkout reads as dirty
    for folder in folders:
        if not (folder / "results.jsonl").is_file():
            print(f"{folder.name}: no results.jsonl (a report of other runs; --render redraws it)")
            continue
        entry = restate(folder, commit=commit)
        if entry is None:
            print(f"{folder.name}: already in today's schema, unchanged")
            continue
        changed = ", ".join(f"{c} {ch['rows_changed']}" for c, ch in entry["columns"].items())
        added = len(entry["columns_added_null"])
        print(
            f"{folder.name}: {entry['rows']} rows; changed: {changed}; {added} columns added null"
        )


def render_all(folders: list[Path]) -> None:
    """Each folder's report drawn again: its own rows, or those of the runs it combines."""
    for folder in folders:
        sources = COMBINED.get(folder.name)
        if sources is not None:
            path = build_report([folder.parent / s for s in sources], folder)
        elif (folder / "results.jsonl").is_file():
            path = build_report([folder])
        else:
            raise SystemExit(f"{folder}: no rows and not a known combined report; cannot render")
        print(f"rendered {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def verdict_png(report: Path, out: Path, executable: str) -> None:
    """Screenshot the verdict section of `report` (heading to caption) into `out`."""
    browser = Browser(executable)
    try:
        targets = browser.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        browser.session = browser.send(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        browser.send("Page.enable")
        browser.send("Runtime.enable")
        # The README shows it at 1050 px, the width of the screenshot it had before.
        metrics = {"width": WIDTH_PX, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics)
        browser.send("Page.navigate", {"url": report.resolve().as_uri()})
        browser.wait_for("Page.loadEventFired")
        box = browser.evaluate(VERDICT_BOX_JS)
        if box is None:
            raise SystemExit(f"{report}: no Verdict section")
        pad = 8
        x = max(0, box["x"] - pad)
        clip = {
            "x": x,
            "y": max(0, box["y"] - pad),
            "width": min(box["width"] + 2 * pad, WIDTH_PX - x),
            "height": box["height"] + 2 * pad,
            "scale": 1,
        }
        shot = browser.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
        )
    finally:
        browser.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(base64.b64decode(shot["data"]))
    print(f"wrote {out} ({json.dumps({k: round(v) for k, v in clip.items()})})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", nargs="*", type=Path, help="run folders (default: results/20261122-*)"
    )
    parser.add_argument("--render", action="store_true", help="re-render their reports")
    parser.add_argument("--verdict-png", type=Path, help="screenshot a verdict section here")
    parser.add_argument("--verdict-report", type=Path, default=VERDICT_REPORT)
    args = parser.parse_args(argv)
    folders = [f.resolve() for f in args.folders] or PUBLISHED
    executable = find_chromium() if args.verdict_png else None
    if args.verdict_png and executable is None:
        print("restate_results: chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    restate_all(folders)
    if args.render:
        render_all(folders)
    if args.verdict_png and executable is not None:
        verdict_png(args.verdict_report, args.verdict_png, executable)
    return 0


if __name__ == "__main__":
    sys.exit(main())
