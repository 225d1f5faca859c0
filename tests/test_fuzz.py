"""Bad input, tried for real: fuzzed suite files and command-line values must each give exit
status 2 and a one-line message, never a traceback. The commands run in this process, into a
run folder this test holds locked, so an input that turns out valid is refused too (by the lock)
instead of starting a sweep. A refusal by the lock counts only where the input is valid: where
an oracle of the allowed values (written out here, not gpubench's own checks) says an input is
invalid, its refusal must be a validation error; where it says valid, the lock's.

Each example runs in a bounded time (a deadline) with its own captured output, and the number
of examples is bounded; failing examples are reported as found, not shrunk (shrinking once took
over 5 minutes).

The fuzz asks what is refused, the same on every machine: CUDA is made absent here (see
_a_host_without_cuda), so "cuda" is refused as it is on a host without a GPU."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from gpubench.cli import main
from gpubench.config.spec import DATA_MODES, MODES, OPTIMIZERS, PRECISIONS, SIZES
from gpubench.run import folder

FUZZ = settings(
    max_examples=int(os.environ.get("GPUBENCH_FUZZ_EXAMPLES", "30")),
    deadline=dt.timedelta(seconds=10),  # a refusal takes milliseconds; a sweep would not
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: bounded time
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LOCKED = "is in use by another sweep"
MODEL_NAMES = ("mlp", "cnn", "transformer")
VALID: dict[str, Any] = {
    "name": "fuzz",
    "models": ["mlp"],
    "size": "tiny",
    "devices": ["cpu"],
    "batch_sizes": [2],
    "precisions": ["fp32"],
    "optimizers": ["sgd"],
}
_scalars = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
)
_values = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=3),
    st.dictionaries(st.text(max_size=5), _scalars, max_size=2),
)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return (
            "nan"
            if v != v
            else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
        )
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def _toml(d: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in d.items())


@pytest.fixture(autouse=True)
def _a_host_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis draws strings from gpubench's own source too, so "cuda" and "auto" come up as
    devices. Where CUDA is present they are valid: the example then ran a CUDA check step before
    the lock refused it (seconds, past the deadline, on a loaded GPU host), and max-batch
    measured (exit 0). This process answers as a host without CUDA instead."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@contextmanager
def _locked_run(tmp_path: Path) -> Iterator[Path]:
    out = tmp_path / "locked"
    with folder.locked(out):
        yield out


def _refused(argv: list[str], valid: bool | None = False) -> str:
    """Run `argv`, which must exit 2 with one line on stderr and no traceback, in output
    captured for this example alone; `valid` (None: unknown) says whether the lock must be the
    reason."""
    out, err_io = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err_io):
        code = main(argv)
    err = err_io.getvalue().strip()
    assert code == 2, (argv, code, err)
    assert len(err.splitlines()) == 1 and err.startswith("gpubench: error: "), (argv, err)
    assert "Traceback" not in err + out.getvalue()
    if valid is not None:
        assert (LOCKED in err) == valid, (argv, err)
    return err


def _items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _all(text: str, ok: Any) -> bool:
    items = _items(text)
    return bool(items) and all(ok(i) for i in items)


def _int_at_least(text: str, least: int) -> bool:
    try:
        return int(text) >= least
    except ValueError:
        return False


def _seconds(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return 0 < value < math.inf


def _flag_valid(flag: str, value: str) -> bool | None:
    """Whether `value` is allowed for sweep's `flag`: the documented values, written out here;
    None where this oracle does not know (a user's model, memory sizes). CUDA is absent here,
    so a CUDA device is refused."""
    if flag == "--models":
        if any(":" in i for i in _items(value)):
            return None
        return _all(value, lambda i: i in MODEL_NAMES)
    if flag == "--devices":
        return _all(value, lambda i: i in ("auto", "cpu"))
    if flag in ("--size", "--data"):
        return value in (SIZES if flag == "--size" else DATA_MODES)
    if flag in ("--precisions", "--optimizers"):
        return _all(value, lambda i: i in (PRECISIONS if flag == "--precisions" else OPTIMIZERS))
    if flag == "--batch-sizes":
        return value.strip() == "auto" or _all(value, lambda i: _int_at_least(i, 1))
    if flag == "--seeds":
        return _all(value, lambda i: _int_at_least(i, 0))
    if flag == "--steps":
        return _int_at_least(value, 1)
    if flag in ("--max-time", "--point-timeout"):
        return _seconds(value)
    return None


def _suite_value_valid(key: str, value: Any) -> bool | None:
    """Whether a suite's `key` may hold `value`, for the keys whose values are plain choices."""
    if key == "unknown_key":
        return False
    choices = {"size": SIZES, "data": DATA_MODES, "mode": MODES}
    if key in choices:
        return isinstance(value, str) and value in choices[key]
    return None


@FUZZ
@given(
    key=st.sampled_from([*VALID, "budget", "seeds", "data", "mode", "unknown_key"]),
    value=_values,
)
@example(key="devices", value=["cuda"])  # valid on a GPU host: refused here, as without one
@example(key="devices", value=["auto"])  # the CPU alone here: valid, so the lock refuses it
def test_fuzzed_suite_values_are_refused(tmp_path: Path, key: str, value: Any) -> None:
    suite = tmp_path / "fuzz.toml"
    suite.write_text(_toml({**VALID, key: value}), encoding="utf-8")
    with _locked_run(tmp_path) as out:
        valid = _suite_value_valid(key, value)
        if key == "mode" and valid:
            valid = None if value == "convergence" else True  # convergence needs its data
        _refused(["sweep", str(suite), "--out", str(out), "--quiet"], valid)


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_fuzzed_suite_files_are_refused(tmp_path: Path, text: str | bytes) -> None:
    suite = tmp_path / "fuzz.toml"
    if isinstance(text, bytes):
        suite.write_bytes(text)
    else:
        suite.write_text(text, encoding="utf-8", errors="surrogatepass")
    out = tmp_path / "never"
    _refused(["sweep", str(suite), "--out", str(out), "--quiet"])
    assert not out.exists()


@FUZZ
@given(
    flag=st.sampled_from(
        [
            "--models",
            "--size",
            "--devices",
            "--batch-sizes",
            "--precisions",
            "--optimizers",
            "--seeds",
            "--data",
            "--steps",
            "--max-time",
            "--max-memory",
            "--point-timeout",
            "--resume",
        ]
    ),
    value=st.text(max_size=20),
)
@example(flag="--devices", value="cuda")
def test_fuzzed_sweep_flags_are_refused(tmp_path: Path, flag: str, value: str) -> None:
    suite = tmp_path / "ok.toml"
    suite.write_text(_toml(VALID))
    with _locked_run(tmp_path) as out:
        target = ["--resume", str(out)] if flag == "--resume" else ["--out", str(out)]
        valid = None if flag == "--resume" else _flag_valid(flag, value)
        _refused(["sweep", str(suite), f"{flag}={value}", *target, "--quiet"], valid)


def _not_a_positive_int(text: str) -> bool:
    try:
        return int(text) < 1
    except ValueError:
        return True


@FUZZ
@given(
    choice=st.sampled_from(
        [
            ("--size", SIZES),
            ("--precision", PRECISIONS),
            ("--optimizer", OPTIMIZERS),
            ("--data", DATA_MODES),
            ("--device", ()),
        ]
    ),
    number_flag=st.sampled_from(["--start", "--ceiling", "--probe-steps"]),
    value=st.text(max_size=12),
    use_number=st.booleans(),
)
# argparse hands an option whose value is "--" an empty list, past its type check: once a
# TypeError traceback (--start=--) and an exit status of 0 (--size=--).
@example(choice=("--size", SIZES), number_flag="--start", value="--", use_number=True)
@example(choice=("--size", SIZES), number_flag="--start", value="--", use_number=False)
@example(choice=("--device", ()), number_flag="--start", value="cuda", use_number=False)
def test_fuzzed_max_batch_flags_are_refused(
    choice: tuple[str, tuple[str, ...]],
    number_flag: str,
    value: str,
    use_number: bool,
) -> None:
    flag, allowed = choice
    if use_number:
        flag = number_flag
        assume(_not_a_positive_int(value))
    elif flag == "--device":
        assume(not re.fullmatch(r"auto|cpu", value))
    else:
        assume(value not in allowed)
    _refused(["max-batch", "--model", "mlp", f"{flag}={value}"])


@FUZZ
@given(saved=st.dictionaries(st.sampled_from([*VALID, "budget", "seeds"]), _values, max_size=4))
def test_fuzzed_saved_suites_cannot_be_resumed(tmp_path: Path, saved: dict[str, Any]) -> None:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "suite.json").write_text(
        json.dumps({**VALID, **saved, "models": saved.get("models", 3)})
    )
    _refused(["sweep", "--resume", str(run), "--quiet"])
