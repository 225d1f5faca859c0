"""A results folder is data (issue 50): a real finished sweep folder, with one field of one row or
one key of one run file set to an odd value (a wrong type, a huge number, NaN, a nested list,
control characters, a missing key, a truncated file), is read by `explain` (and `explain
--json`), `report`, `compare` against the original and `sweep --resume`, each in this process:
each ends with status 0, 1 or 2, its error output is gpubench's own lines (no traceback), no
file outside the copied folder is created or changed, and no module is imported from it.

Bounded for CI as tests/test_fuzz.py is: GPUBENCH_FOLDER_FUZZ_EXAMPLES examples (default 8), a
deadline per example, no shrinking. `report` and a resume draw charts, the slowest of the
commands: each runs on the explicit example, and on every REPORT_EVERY-th generated one where
GPUBENCH_FOLDER_FUZZ_REPORT_EVERY is set (0, the default: none, to fit CI's time)."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import itertools
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from gpubench.cli.main import main

FUZZ = settings(
    max_examples=int(os.environ.get("GPUBENCH_FOLDER_FUZZ_EXAMPLES", "8")),
    deadline=dt.timedelta(seconds=120),  # a resume that is accepted redraws the report
    phases=[Phase.explicit, Phase.generate],  # no shrinking: bounded time
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
# 0: report and resume only on the explicit example (a report draws for seconds: CI's budget)
REPORT_EVERY = int(os.environ.get("GPUBENCH_FOLDER_FUZZ_REPORT_EVERY", "0"))
FILES = ("results.jsonl", "suite.json", "env.json", "confirm.json", "phases.json")
CONTROL = "\x1b[31m\r\x07\x1b]0;title\x07\x00\x9b"

_scalars = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**400, -1, 0, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from([CONTROL, "eight", "", "cuda:99", "os:system"]),
    st.booleans(),
    st.none(),
)
ODD = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=3),
    st.lists(st.lists(_scalars, max_size=2), max_size=2),
    st.dictionaries(st.text(max_size=5), _scalars, max_size=2),
    st.just("__delete__"),
)


@pytest.fixture
def finished(finished_sweep: Path) -> Path:
    """A real tiny finished sweep folder (2 points, confirmed): the session's
    (conftest.finished_sweep; under xdist, shared by the workers, outside tmp_path.parent), which
    every check watches unchanged beside tmp_path.parent."""
    return finished_sweep


def _paths(value: Any, where: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a JSON value (the value's own first)."""
    out = [where]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*where, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*where, i))
    return out


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """`value` with the item at `path` replaced by `new` (removed where `new` is the
    "__delete__" marker and the path is not the root)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if rest or new != "__delete__":
        value[head] = _set(value[head], rest, new)
    else:
        del value[head]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True, default=str)


@st.composite
def mutations(draw: st.DrawFn, folder: Path) -> tuple[str, str]:
    """(file name, its new text): one file of `folder` with one odd change."""
    name = draw(st.sampled_from([n for n in FILES if (folder / n).is_file()]))
    text = (folder / name).read_text(encoding="utf-8")
    if draw(st.integers(0, 9)) == 0:  # a truncated file
        return name, text[: draw(st.integers(0, max(0, len(text) - 1)))]
    odd = draw(ODD)
    if name == "results.jsonl":
        lines = text.splitlines()
        i = draw(st.integers(0, len(lines) - 1))
        row = json.loads(lines[i])
        path = draw(st.sampled_from(sorted(_paths(row), key=str)))
        lines[i] = _dumps(_set(row, path, odd))
        return name, "\n".join(lines) + "\n"
    data = json.loads(text)
    path = draw(st.sampled_from(sorted(_paths(data), key=str)))
    return name, _dumps(_set(data, path, odd))


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _listing(root: Path, but: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` outside `but`, with its size and modification time."""
    found = {}
    for p in root.rglob("*"):
        if p.is_file() and but not in p.parents:
            st_ = p.stat()
            found[str(p)] = (st_.st_size, st_.st_mtime_ns)
    return found


def _check(argv: list[str], folder: Path, watched: Path, finished: Path) -> None:
    """`argv` answers in one line or none, and changes no file under `watched` nor `finished`
    but those of `folder`."""

    def listing() -> dict[str, tuple[int, int]]:
        return _listing(watched, folder) | _listing(finished, folder)

    before = listing()
    modules = set(sys.modules)
    code, out, err = _run(argv)
    shown = f"{argv}: status {code}\n{err[-3000:]}"
    assert code in (0, 1, 2), shown
    assert "Traceback" not in out + err, shown
    assert all(line.startswith("gpubench:") for line in err.splitlines() if line.strip()), shown
    assert listing() == before, shown
    for name in set(sys.modules) - modules:
        where = getattr(sys.modules[name], "__file__", None) or ""
        assert not where.startswith(str(folder)), f"{argv} imported {name} from {where}"


_count = itertools.count()


def test_odd_folder_is_read_without_a_traceback(finished: Path, tmp_path: Path) -> None:
    @FUZZ
    @given(st.data())
    @example(None)
    def run(data: Any) -> None:
        n = next(_count)
        case = tmp_path / f"case{n}"
        shutil.rmtree(case, ignore_errors=True)
        folder = case / "run"
        shutil.copytree(finished, folder)
        if data is None:  # the explicit example: the issue's own case
            name = "results.jsonl"
            lines = (folder / name).read_text(encoding="utf-8").splitlines()
            row = json.loads(lines[0])
            row["batch_size"] = "eight"
            lines[0] = json.dumps(row)
            text = "\n".join(lines) + "\n"
        else:
            name, text = data.draw(mutations(finished))
        (folder / name).write_text(text, encoding="utf-8")
        watched = tmp_path.parent  # the base folder, every other case, tmp_path's siblings
        for argv in (
            ["explain", str(folder)],
            ["explain", "--json", str(folder)],
            ["compare", str(finished), str(folder)],
        ):
            _check(argv, folder, watched, finished)
        if data is None or (REPORT_EVERY and n % REPORT_EVERY == 1):
            _check(["report", str(folder)], folder, watched, finished)
        if data is None or (REPORT_EVERY and n % REPORT_EVERY == 2):
            argv = ["sweep", "--resume", str(folder), "--no-confirm", "--quiet"]
            _check(argv, folder, watched, finished)
        shutil.rmtree(case)

    run()


def _copy_with(finished: Path, tmp_path: Path, name: str, change: Any) -> Path:
    """A copy of `finished` whose file `name` is `change`d (a function of its JSON value; for
    results.jsonl, of its first row)."""
    folder = tmp_path / "run"
    shutil.copytree(finished, folder)
    path = folder / name
    if name == "results.jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[0] = _dumps(change(json.loads(lines[0])))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path.write_text(_dumps(change(json.loads(path.read_text(encoding="utf-8")))))
    return folder


ISSUE_CASES = {
    "batch_size eight": ("results.jsonl", lambda r: {**r, "batch_size": "eight"}),
    "precision list": ("results.jsonl", lambda r: {**r, "precision": ["fp32"]}),
    "model with ESC": ("results.jsonl", lambda r: {**r, "model": "mlp\x1b[2J"}),
    "cpu fast": ("env.json", lambda e: {**e, "cpu": "fast"}),
    "decision winner only": (
        "confirm.json",
        lambda c: {**c, "partitions": [{**c["partitions"][0], "decision": {"winner": 0}}]},
    ),
    "seeds by the thousand": ("suite.json", lambda s: {**s, "seeds": list(range(20_000))}),
    "seeds x batch sizes": (
        "suite.json",
        lambda s: {**s, "seeds": list(range(5000)), "batch_sizes": list(range(1, 100))},
    ),
}


@pytest.mark.parametrize("case", list(ISSUE_CASES))
def test_issue_cases_are_one_line(finished: Path, tmp_path: Path, case: str) -> None:
    """The issue's tracebacks: explain and compare go on with what can be read; a resume, which
    appends to the folder, refuses in one line naming the file and the field."""
    name, change = ISSUE_CASES[case]
    folder = _copy_with(finished, tmp_path, name, change)
    for argv in (["explain", str(folder)], ["compare", str(finished), str(folder)]):
        _check(argv, folder, tmp_path.parent, finished)
    if name == "confirm.json":  # a resume without a confirmation does not read it
        return
    code, _, err = _run(["sweep", "--resume", str(folder), "--no-confirm", "--quiet"])
    assert code == 2, err
    assert name in err and len(err.strip().splitlines()) == 1, err


def test_a_row_with_a_field_of_the_wrong_type_is_left_out_with_a_note(
    finished: Path, tmp_path: Path
) -> None:
    folder = _copy_with(finished, tmp_path, "results.jsonl", lambda r: {**r, "batch_size": "x"})
    note = "results.jsonl, line 1: batch_size is 'x', not a whole number; that row is left out"
    with pytest.warns(UserWarning, match=re.escape(note)):
        code, out, _ = _run(["explain", str(folder)])
    assert code == 0 and "B=8" in out  # the other row is read


def test_control_characters_never_reach_the_terminal(finished: Path, tmp_path: Path) -> None:
    folder = _copy_with(finished, tmp_path, "results.jsonl", lambda r: {**r, "host": "a\x1b[2Jb"})
    for argv in (["explain", str(folder)], ["compare", str(finished), str(folder)]):
        _, out, err = _run(argv)
        assert "\x1b" not in out + err, argv


def test_malformed_pytest_benchmark_json_is_one_line(tmp_path: Path) -> None:
    for i, bench in enumerate(
        [
            {"name": "t", "stats": {"median": "fast"}},
            {"name": "t", "stats": {"median": 0.1}, "extra_info": [1]},
            {"name": "t", "stats": {"median": 0.1, "data": [0.1, "x"]}},
            {"name": "t", "stats": {"median": 0.1}, "params": {"batch_size": "eight"}},
        ]
    ):
        path = tmp_path / f"b{i}.json"
        path.write_text(json.dumps({"benchmarks": [bench]}))
        code, _, err = _run(["compare", str(path), str(path)])
        assert code == 2 and err.startswith(f"gpubench: error: {path}: benchmark 0"), err
