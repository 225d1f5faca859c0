"""Joins run folders (the shards of one sweep, or runs on other machines) into one run folder
that the report reads like any other: every row once, env.json with every machine."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.run import folder
from gpubench.run.sweep import _row_key
from gpubench.science import scaling
from gpubench.store.results import ResultsError, ResultStore, read_rows


@dataclass(frozen=True)
class Merged:
    """What merge wrote: `rows` kept, and `dropped` rows of points already present (only with
    allow_duplicates)."""

    out: Path
    rows: int
    dropped: int


def _env(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "env.json"
    try:
        env = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError as e:
        raise ConfigError(f"cannot read {path}: {e}") from None
    return env if isinstance(env, dict) else {}


def _machines(run_dir: Path, env: dict[str, Any]) -> list[dict[str, Any]]:
    """The machines a run folder holds: its own env, or, for a merged folder, each of them."""
    if isinstance(env.get("machines"), list):
        return list(env["machines"])
    return [{"run": str(run_dir), **env}]


def _describe(machine: dict[str, Any]) -> str:
    host = machine.get("hostname") or "unknown host"
    return f"{machine.get('run')} (host {host}, captured {machine.get('captured_at', '?')})"


def merge(dirs: list[Path], out: Path, allow_duplicates: bool = False) -> Merged:
    """Write run folder `out` from the run folders `dirs`: their rows in order, each point
    once. A point in two folders is a ConfigError naming both (their machines and times),
    unless `allow_duplicates`, which keeps the first. env.json is the first folder's, with
    `machines` listing every folder's; suite.json is kept where all folders share it."""
    if len(dirs) < 1:
        raise ConfigError("merge needs at least one run folder")
    resolved = {d.resolve() for d in dirs}
    if out.resolve() in resolved:
        raise ConfigError(f"--out {out} is one of the folders to merge; choose a new folder")
    sources = []
    for d in dirs:
        try:
            sources.append((d, read_rows(d), _env(d)))
        except ResultsError as e:
            raise ConfigError(str(e)) from e
    owner: dict[tuple[Any, ...], dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    dropped = 0
    for d, run_rows, env in sources:
        machine = _machines(d, env)[0]
        for row in run_rows:
            key = _row_key(row)
            if key in owner:
                if not allow_duplicates:
                    raise ConfigError(
                        f"point {Point.of(row).label()} is in {_describe(owner[key])} and in "
                        f"{_describe(machine)}; keep the first with --allow-duplicates, or "
                        "leave one folder out"
                    )
                dropped += 1
                continue
            owner[key] = machine
            rows.append(row)
    scaling.fill_efficiency(rows)  # a shard's rows may have their baseline in another shard
    with folder.locked(out):
        folder.check_fresh(out)
        store = ResultStore(out)
        machines = [m for d, _, env in sources for m in _machines(d, env)]
        store.write_json("env.json", {**sources[0][2], "machines": machines})
        suites = [
            folder.saved_suite(d) if (d / "suite.json").is_file() else None for d, _, _ in sources
        ]
        if suites[0] is not None and all(s == suites[0] for s in suites):
            store.write_json("suite.json", suites[0])
        store.write_json(
            "merge.json",
            {"sources": [str(d) for d in dirs], "rows": len(rows), "dropped": dropped},
        )
        for row in rows:
            store.append(row)
        store.write_csv()
    return Merged(out, len(rows), dropped)
