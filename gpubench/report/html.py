"""The report page: one HTML file, no network access, every string from a results file escaped.
Its Content-Security-Policy allows images from plots/ and data: URIs, inline styles, and one
script (the table sorter, by its SHA-256); nothing else loads."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import Any

from gpubench.report.figure import Chart
from gpubench.report.runs import Run
from gpubench.store import pace_record, wording
from gpubench.store.wording import missing

SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0];
    var up = th.dataset.dir !== "up";
    th.closest("tr").querySelectorAll("th").forEach(function (h) { delete h.dataset.dir; });
    th.dataset.dir = up ? "up" : "down";
    var key = function (tr) {
      var td = tr.children[col];
      var v = td.dataset.v !== undefined ? td.dataset.v : td.textContent;
      var n = parseFloat(v);
      return isNaN(n) ? v : n;
    };
    Array.from(body.rows).sort(function (a, b) {
      var x = key(a), y = key(b);
      if (typeof x !== typeof y) { x = String(x); y = String(y); }
      return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
    }).forEach(function (tr) { body.appendChild(tr); });
  });
});
"""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; color: #222;
       padding: 0 1em; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f2f2f2; } table.sortable th { cursor: pointer; }
th[data-dir="up"]::after { content: " \\25B2"; } th[data-dir="down"]::after { content: " \\25BC"; }
img { max-width: 100%; border: 1px solid #eee; }
.note { background: #fff8e0; border-left: 4px solid #e0b000; padding: 0.4em 0.8em; }
.caption { color: #555; font-size: 14px; max-width: 70em; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 12px; }
.scroll { overflow-x: auto; }
.verdict { border-left: 4px solid #3a7bd5; background: #f5f8fd; padding: 0.3em 1em;
           margin: 0.6em 0; } .verdict h3 { margin: 0.3em 0; } .verdict ul { margin: 0.2em 0; }
"""


def csp() -> str:
    """The page's Content-Security-Policy: only its own images, inline styles, and the sorter."""
    digest = base64.b64encode(hashlib.sha256(SORT_SCRIPT.encode()).digest()).decode()
    return (
        "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'"
    )


def e(value: Any) -> str:
    """Any value as escaped HTML text; null (None, NaN) as an empty string."""
    if missing(value):
        return ""
    return escape(str(value), quote=True)


def cell(value: Any, spec: str = ",.4g", scale: float = 1.0) -> tuple[str, Any]:
    """A table's number cell: `value` written by wording.cell, sorted by its raw value."""
    return wording.cell(value, spec, scale), value


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    sortable: bool = False,
) -> str:
    """An HTML table. A cell is escaped text, or (text, sort value) for a right-aligned number
    whose column sorts by the raw value."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                text, raw = cell
                v = "" if missing(raw) else f' data-v="{e(raw)}"'
                cells.append(f'<td class="n"{v}>{e(text)}</td>')
            else:
                cells.append(f"<td>{e(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cls = ' class="sortable"' if sortable else ""
    return (
        f'<div class="scroll"><table{cls}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


Column = tuple[str, Callable[[Any], Any]]


def columns_table(columns: Sequence[Column], rows: Iterable[Any], sortable: bool = False) -> str:
    """table() of `rows`: a column per (heading, the cell a row gives) of `columns`."""
    cells = [[cell(r) for _, cell in columns] for r in rows]
    return table([heading for heading, _ in columns], cells, sortable)


def figure(c: Chart) -> str:
    """The chart's image (from plots/ beside the page) and its caption."""
    return (
        f'<img src="plots/{e(c.file)}" alt="{e(c.title)} chart">\n'
        f'<p class="caption">{e(c.caption)}</p>\n'
    )


def chart(c: Chart) -> str:
    """The chart as a section: heading, image, caption."""
    return f"<h2>{e(c.title)}</h2>\n" + figure(c)


def bullets(lines: Iterable[str | None]) -> str:
    """A bulleted list of the lines given (an empty or None one left out), escaped."""
    return "<ul>" + "".join(f"<li>{e(line)}</li>" for line in lines if line) + "</ul>"


def note(text: str) -> str:
    return f'<p class="note">{e(text)}</p>'


def page(title: str, sections: Sequence[str]) -> str:
    """The whole document: `sections` are HTML fragments built with the helpers above."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp()}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'<h1>{e(title)}</h1>\n<p class="caption">Generated {e(stamp)} by gpubench.</p>\n'
        + "\n".join(sections)
        + f"\n<script>{SORT_SCRIPT}</script>\n</body>\n</html>\n"
    )


def runs_section(runs: Sequence[Run]) -> str:
    """One line per run folder: where it is, when, the machines (hostnames) and devices its rows
    ran on (each named from its own machine: a merged folder lists every one), its points, and
    its wall time with the points it measured per minute (store.pace_record)."""
    rows = []
    for r in runs:
        counts = r.frame["status"].value_counts()
        status = ", ".join(f"{n} {s}" for s, n in counts.items())
        hosts = ", ".join(r.hosts()) or "not recorded"
        devices = ", ".join(r.device_names())
        pace = pace_record.of_folder(r.path)  # issue 53: a pool's or a launch's speedup
        took = pace.line().removeprefix("wall time ") if pace is not None else "not recorded"
        rows.append(
            [r.name, str(r.path), r.env.get("captured_at"), hosts, devices, status, took, r.commit]
        )
    headers = ["run", "folder", "captured", "machines", "devices", "points", "wall time"]
    return "<h2>Runs</h2>\n" + table([*headers, "git commit"], rows)


def environment_section(runs: Sequence[Run]) -> str:
    """Per run, the facts of every machine its rows ran on (a merged folder's env.json lists
    each under `machines`), then the whole env.json."""
    parts = ["<h2>Environment</h2>"]
    for r in runs:
        env = r.env
        if not env:
            parts.append(note(f"Run {r.name} has no env.json."))
            continue
        machines = r.machines()
        parts.append(f"<h3>{e(r.name)}</h3>")
        if len(machines) > 1:
            parts.append(
                note(f"Run {r.name} joins the rows of {len(machines)} run folders (merge):")
            )
        for m in machines:
            if len(machines) > 1:
                parts.append(f"<h4>{e(str(m.get('run') or m.get('hostname') or '?'))}</h4>")
            parts.append(table(["", ""], _machine_facts(m)))
        full = json.dumps(env, indent=2, default=str)
        parts.append(f"<details><summary>env.json</summary><pre>{e(full)}</pre></details>")
    return "\n".join(parts)


def _machine_facts(env: dict[str, Any]) -> list[list[Any]]:
    torch = env.get("torch") or {}
    cpu = env.get("cpu") or {}
    return [
        ["Host", env.get("hostname") or "not recorded"],
        ["Captured", env.get("captured_at")],
        [
            "CPU",
            f"{cpu.get('model')} ({cpu.get('usable_cores')} usable cores, "
            f"{cpu.get('torch_threads')} torch threads)",
        ],
        [
            "GPUs",
            "; ".join(
                f"{g.get('name')} ({wording.cell(g.get('memory_bytes'), ',.1f', 1 / 1024**3)} GiB)"
                for g in env.get("gpus") or []
                if isinstance(g, dict)
            )
            or "none",
        ],
        [
            "torch / CUDA / cuDNN",
            f"{torch.get('version')} / {torch.get('cuda')} / {torch.get('cudnn')}",
        ],
        ["Python, OS", f"{env.get('python')}, {env.get('os')}"],
    ]
