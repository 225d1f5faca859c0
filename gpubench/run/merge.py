"""Joins run folders (the shards of one sweep, or runs on other machines) into one run folder
that the report reads like any other: every row once, env.json with every machine."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.keys import partition_key
from gpubench.config.spec import Point
from gpubench.run import folder
from gpubench.science import scaling
from gpubench.store import confirmations, env, merge_record, suite_record
from gpubench.store.confirmations import Confirmations, Partition
from gpubench.store.results import ResultsError, ResultStore, read_rows
from gpubench.store.typed_json import RecordError


@dataclass(frozen=True)
class Merged:
    """What merge wrote: `rows` kept; `dropped` duplicates (allow_duplicates), `replaced` of
    them a failed row an `ok` one replaced; `machines`, each distinct machine's label."""

    out: Path
    rows: int
    dropped: int
    replaced: int = 0
    machines: tuple[str, ...] = ()
    # the partitions whose confirmation a source's confirm.json gave ("label (from DIR)"), and
    # those whose rows come from several sources, not confirmed (their labels)
    confirmed: tuple[str, ...] = ()
    not_confirmed: tuple[str, ...] = ()
    how_to_confirm: str = ""


def _machines(run_dir: Path, env_obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The machines a run folder holds: its own env, or, for a merged folder, each of them."""
    if isinstance(env_obj.get("machines"), list):
        return list(env_obj["machines"])
    return [{"run": str(run_dir), **env_obj}]


def _describe(machine: dict[str, Any]) -> str:
    host = machine.get("hostname") or "unknown host"
    return f"{machine.get('run')} (host {host}, captured {machine.get('captured_at', '?')})"


def machine_label(machine: dict[str, Any]) -> str:
    """A machine as merge names it: 'host: GPU names, CPU model' ('unknown host' where its
    env.json has no hostname)."""
    facts = env.machine(machine)
    devices = [*(g for g in facts["gpus"] if g), *([f"CPU {facts['cpu']}"] if facts["cpu"] else [])]
    return f"{machine.get('hostname') or 'unknown host'}: {', '.join(devices) or 'no env.json'}"


def joined_machines(machines: list[dict[str, Any]]) -> tuple[str, ...]:
    """Each distinct machine (hostname and env.machine) once, labelled; two sharing a label are
    told apart by torch and driver."""
    seen: dict[str, dict[str, Any]] = {}
    for m in machines:
        seen.setdefault(json.dumps([m.get("hostname"), env.machine(m)], default=str), m)
    labels = [machine_label(m) for m in seen.values()]
    return tuple(
        label
        if labels.count(label) == 1
        else f"{label} (torch {env.machine(m)['torch']}, driver {env.machine(m)['driver']})"
        for label, m in zip(labels, seen.values(), strict=True)
    )


def _own_machine(row: dict[str, Any], machines: list[dict[str, Any]]) -> dict[str, Any]:
    """`row` with `host` and `device_name`, from its folder's env.json where the row lacks them
    and the folder is one machine's."""
    if row.get("host") is not None or len(machines) != 1:
        return row
    (m,) = machines
    name = row.get("device_name") or env.named_device(m, str(row.get("device")))
    return {**row, "host": m.get("hostname"), "device_name": name}


def _failed(row: dict[str, Any]) -> bool:
    return row.get("status") != "ok"


def merge(
    dirs: list[Path], out: Path, allow_duplicates: bool = False, across_machines: bool = False
) -> Merged:
    """Write run folder `out` from `dirs`: their rows in order, each point once per device
    name. A point in two folders is a ConfigError naming both, unless `allow_duplicates`: then
    it keeps its first `ok` row (else its first), where it first appeared. Each row keeps its
    machine (`host`, `device_name`; an old row gets its folder's). env.json is the first
    folder's with every folder's `machines`; suite.json where all share it; confirm.json with
    each source's confirmation of a partition whose rows all come from it, and each partition
    whose rows come from several said not confirmed (_confirmations); merge.json records
    sources, counts, machines and which confirmations were kept."""
    if len(dirs) < 1:
        raise ConfigError("merge needs at least one run folder")
    resolved = {d.resolve() for d in dirs}
    if out.resolve() in resolved:
        raise ConfigError(f"--out {out} is one of the folders to merge; choose a new folder")
    sources = []
    for d in dirs:
        try:
            sources.append((d, read_rows(d), env.read(d)))
        except ResultsError as e:
            raise ConfigError(str(e)) from e
    if not any(run_rows for _, run_rows, _ in sources):
        names = ", ".join(repr(str(d)) for d in dirs)
        raise ConfigError(f"nothing to merge: {names} hold no rows; allowed: run folders with rows")
    owner: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = {}  # point: (position, machine)
    rows: list[dict[str, Any]] = []
    origin: list[int] = []  # per row, the source it came from
    dropped = replaced = 0
    for n, (d, run_rows, env_obj) in enumerate(sources):
        machines = _machines(d, env_obj)
        for row in run_rows:
            row = _own_machine(row, machines)
            # The same point on two devices (an A100 and an H100) is two rows, not a duplicate.
            key = (*Point.of(row).key(), row.get("device_name"))
            if key not in owner:
                owner[key] = (len(rows), machines[0])
                rows.append(row)
                origin.append(n)
                continue
            at, first = owner[key]
            if not allow_duplicates:
                raise ConfigError(
                    f"point {Point.of(row).label()} is in {_describe(first)} and in "
                    f"{_describe(machines[0])}; keep its first ok row with --allow-duplicates, "
                    "or leave one folder out"
                )
            dropped += 1
            if _failed(rows[at]) and not _failed(row):
                rows[at] = row
                origin[at] = n
                owner[key] = (at, machines[0])
                replaced += 1
    # A shard's rows may have their baseline in another shard; each row keeps its own host.
    scaling.fill_efficiency(rows, across_machines=across_machines)
    every = [m for d, _, env_obj in sources for m in _machines(d, env_obj)]
    joined = joined_machines(every)
    suites = [suite_record.read(d) for d, _, _ in sources]
    one_suite = suites[0] is not None and all(s == suites[0] for s in suites)
    found = _confirmations(dirs, rows, origin, out, one_suite and len(joined) == 1)
    with folder.locked(out):
        folder.check_fresh(out)
        store = ResultStore(out)
        store.write_json(env.ENV_FILE, {**sources[0][2], "machines": every})
        if one_suite:
            suite_record.write(out, suites[0])  # type: ignore[arg-type]
        kept = found.kept if found is not None else ()
        unconfirmed = found.unconfirmed if found is not None else ()
        merge_record.write(store, dirs, len(rows), dropped, replaced, joined, kept, unconfirmed)
        if found is not None and found.record.partitions:
            found.record.write(out)
        for row in rows:
            store.append(row)
        store.write_csv()
    how = found.how if found is not None else ""
    return Merged(out, len(rows), dropped, replaced, joined, kept, unconfirmed, how)


@dataclass(frozen=True)
class _Found:
    record: Confirmations
    kept: tuple[str, ...]
    unconfirmed: tuple[str, ...]
    how: str


def _label(fixed: dict[str, Any]) -> str:
    """A partition as merge names it: its fixed settings that are set ("mlp tiny adamw")."""
    return " ".join(str(v) for v in fixed.values() if v is not None)


def _confirmations(
    dirs: list[Path], rows: list[dict[str, Any]], origin: list[int], out: Path, resumable: bool
) -> _Found | None:
    """The merged folder's confirm.json: each source's record of a partition whose rows all
    come from that source, kept; a partition whose rows come from several sources recorded as
    not confirmed (their leaders were never re-measured side by side), with how to confirm it
    (`resumable`: the merged folder has one suite and one machine, so its resume confirms
    every partition; else a sweep measuring them together). None where no source has a
    confirmation and no partition's rows come from several."""
    parts: dict[tuple[Any, ...], list[int]] = {}
    for row, n in zip(rows, origin, strict=True):
        parts.setdefault(partition_key(row), []).append(n)
    records: list[Partition] = []
    kept: list[str] = []
    several: list[dict[str, Any]] = []
    read: dict[int, dict[tuple[Any, ...], Partition]] = {}
    totals: list[Confirmations] = []
    for n, d in enumerate(dirs):
        try:
            c = confirmations.read(d)
        except RecordError as e:
            raise ConfigError(str(e)) from e
        if c is not None:
            totals.append(c)
            read[n] = {partition_key(p.fixed): p for p in c.partitions}
    for key, sources in parts.items():
        if len(set(sources)) == 1:
            record = read.get(sources[0], {}).get(key)
            if record is not None:
                records.append(record)
                kept.append(f"{_label(record.fixed)} (from {dirs[sources[0]]})")
        else:
            several += [r for r, n in zip(rows, origin, strict=True) if partition_key(r) == key]
    if not records and not several:
        return None
    if resumable:
        resume = f"python -m gpubench sweep --resume {shlex.quote(str(out))}"
        how = f"to confirm, resume the merge: {resume}"
    else:
        how = "to confirm, measure the points in one sweep"
    reason = "its rows come from several merged run folders, never re-measured side by side; " + how
    judged = confirmations.unconfirmed(several, reason)
    share = totals[0].share if totals else 0.0
    seconds = sum(p.seconds or 0.0 for p in records)
    point_s = sum(c.sweep_point_seconds for c in totals)
    record = Confirmations(share, seconds, point_s, (*records, *judged))
    return _Found(record, tuple(kept), tuple(_label(p.fixed) for p in judged), how)
