"""Guards of a run folder: one sweep at a time (a lock file), no silent mixing of runs, and
resuming a sweep only with the suite it was started with."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import AXES, SweepSpec
from gpubench.config.validate import validate
from gpubench.store import env, suite_record, tune_record
from gpubench.store.results import RESULTS_FILE

LOCK_NAME = ".lock"


@contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir`'s lock for the block, or raise ConfigError when another sweep holds it (an
    flock: the kernel drops it when its holder dies, so none is left stale)."""
    import fcntl

    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError(
            f"run folder {str(run_dir)!r} is in use by another sweep (pid {holder}); "
            "wait for it to finish or choose another --out"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def in_use(run_dir: Path) -> bool:
    """Whether a sweep holds `run_dir`'s lock now (it is still running): a shared lock on its
    lock file is refused. A folder without one was never locked."""
    import fcntl

    path = run_dir / LOCK_NAME
    if not path.is_file():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases a lock taken
    return False


def check_fresh(run_dir: Path) -> None:
    """A new sweep never appends to another run's results."""
    results = run_dir / RESULTS_FILE
    if results.is_file() and results.stat().st_size > 0:
        raise ConfigError(
            f"run folder {str(run_dir)!r} already holds results; continue that sweep with "
            f"--resume {run_dir}, or choose another --out"
        )


def saved_suite(run_dir: Path) -> dict[str, Any]:
    """The suite a run was started with (its suite.json, store.suite_record), as a plain dict;
    a folder without one is a ConfigError (nothing to resume)."""
    if (run_dir / tune_record.FILE).is_file():
        raise ConfigError(
            f"cannot resume {str(run_dir)!r} as a sweep: it holds a tune ({tune_record.FILE}); "
            f"go on with it with: python -m gpubench tune --resume {run_dir}"
        )
    saved = suite_record.read(run_dir) if run_dir.is_dir() else None
    if saved is None:
        raise ConfigError(
            f"nothing to resume in {str(run_dir)!r}: it has no {suite_record.FILE}; "
            "allowed: the folder of a sweep started by gpubench"
        )
    return saved


def spec_from_saved(saved: dict[str, Any]) -> SweepSpec:
    """Rebuild the SweepSpec that wrote `saved` (a suite.json), validated."""
    kwargs: dict[str, Any] = {}
    try:
        for f in dataclasses.fields(SweepSpec):
            if f.name not in saved:
                continue
            value = saved[f.name]
            default = f.default_factory() if callable(f.default_factory) else f.default
            if dataclasses.is_dataclass(default) and isinstance(value, dict):
                # a nested setting kept as JSON lists (convergence's per-model targets: pairs)
                fields = {k: _tuples(v) for k, v in value.items()}
                value = dataclasses.replace(default, **fields)  # type: ignore[type-var]
            kwargs[f.name] = _tuples(value)
        return validate(SweepSpec(**kwargs))
    except (TypeError, ConfigError) as e:
        raise ConfigError(f"the saved suite.json cannot be used: {e}") from None


def _tuples(value: Any) -> Any:
    """`value` with JSON's lists as the tuples a spec holds, nested ones too."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def as_saved(spec: SweepSpec) -> dict[str, Any]:
    """`spec` as it reads back from suite.json (tuples as lists, infinity as float)."""
    loaded: dict[str, Any] = json.loads(json.dumps(spec.to_dict(), default=str))
    return loaded


def with_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """`saved` (a suite.json) with every setting added since the run began at its default (the
    value the run was measured with), tables included."""
    default = as_saved(SweepSpec(name="", models=("mlp",)))
    out = dict(saved)
    for key, value in default.items():
        if key not in out:
            out[key] = value
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = {**value, **out[key]}
    return out


def check_resumable(run_dir: Path, spec: SweepSpec, extend: bool) -> None:
    """Refuse to resume `run_dir` with a suite other than its own; with `extend`, the axes may
    change (new points are added) but not how each point is measured."""
    saved = with_defaults(saved_suite(run_dir))  # a setting added since had its default there
    here = as_saved(spec)
    # issue 51: the noise phase's budget is no part of the points nor of how they are measured
    keys = {*saved, *here} - {"noise_budget_s"}
    changed = sorted(k for k in keys if saved.get(k) != here.get(k))
    if not changed:
        return
    where = str(run_dir)
    diff = "; ".join(_differences(saved, here, changed)[:3])
    settings = [k for k in changed if k not in AXES and k != "name"]
    if settings:
        raise ConfigError(
            f"cannot resume {where!r}: it was measured with other settings ({diff}); "
            "points measured differently would not be comparable, so choose another --out"
        )
    if not extend:
        raise ConfigError(
            f"cannot resume {where!r}: the suite differs from the one it was started with "
            f"({diff}); add --extend to measure the new points into it, or choose another --out"
        )


def _differences(saved: dict[str, Any], here: dict[str, Any], changed: list[str]) -> list[str]:
    """Each changed setting as "key: old there, new here"; a table (budget) by the keys of it
    that changed (budget.min_steps), not as two whole tables."""
    out = []
    for k in changed:
        old, new = saved.get(k), here.get(k)
        if isinstance(old, dict) and isinstance(new, dict):
            keys = sorted(j for j in {*old, *new} if old.get(j) != new.get(j))
            out += [f"{k}.{j}: {old.get(j)!r} there, {new.get(j)!r} here" for j in keys]
        else:
            out.append(f"{k}: {old!r} there, {new!r} here")
    return out


def check_same_machine(run_dir: Path) -> None:
    """Refuse to resume `run_dir` on another machine (env.machine), naming the difference, or
    a folder with rows but no env.json (their machine is unknown)."""
    if not (run_dir / env.ENV_FILE).is_file():
        results = run_dir / RESULTS_FILE
        if results.is_file() and results.read_bytes().strip():
            raise ConfigError(
                f"cannot resume {str(run_dir)!r}: it holds rows but no env.json, so the machine "
                "they were measured on is unknown and rows of two machines could be mixed; "
                "restore its env.json, or choose another --out"
            )
        return  # the sweep stopped before capturing it: no row was measured either
    saved = env.machine(env.read(run_dir))
    here = env.current_machine()
    changed = [k for k in here if saved.get(k) != here[k]]
    if changed:
        diff = "; ".join(f"{k}: {saved.get(k)!r} there, {here[k]!r} here" for k in changed)
        raise ConfigError(
            f"cannot resume {str(run_dir)!r}: it was measured on another machine ({diff}); "
            "rows of two machines would be mixed, so resume it there or choose another --out"
        )
