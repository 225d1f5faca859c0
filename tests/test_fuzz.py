"""Bad input, tried for real: fuzzed suite files and command-line values must each give exit
status 2 and a one-line message, never a traceback. The commands run in this process, into a
run folder this test holds locked, so an input that turns out valid is refused too (by the lock)
instead of starting a sweep."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from gpubench.cli import main
from gpubench.config.spec import DATA_MODES, OPTIMIZERS, PRECISIONS, SIZES
from gpubench.run import folder

FUZZ = settings(
    max_examples=int(os.environ.get("GPUBENCH_FUZZ_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
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


@contextmanager
def _locked_run(tmp_path: Path) -> Iterator[Path]:
    out = tmp_path / "locked"
    with folder.locked(out):
        yield out


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2, argv
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("gpubench: error: "), (argv, err)
    assert "Traceback" not in captured.err + captured.out
    return err


@FUZZ
@given(
    key=st.sampled_from([*VALID, "budget", "seeds", "data", "mode", "unknown_key"]),
    value=_values,
)
def test_fuzzed_suite_values_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: Any
) -> None:
    suite = tmp_path / "fuzz.toml"
    suite.write_text(_toml({**VALID, key: value}), encoding="utf-8")
    with _locked_run(tmp_path) as out:
        _refused(capsys, ["sweep", str(suite), "--out", str(out), "--quiet"])


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_fuzzed_suite_files_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes
) -> None:
    suite = tmp_path / "fuzz.toml"
    if isinstance(text, bytes):
        suite.write_bytes(text)
    else:
        suite.write_text(text, encoding="utf-8", errors="surrogatepass")
    out = tmp_path / "never"
    _refused(capsys, ["sweep", str(suite), "--out", str(out), "--quiet"])
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
def test_fuzzed_sweep_flags_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    suite = tmp_path / "ok.toml"
    suite.write_text(_toml(VALID))
    with _locked_run(tmp_path) as out:
        target = ["--resume", str(out)] if flag == "--resume" else ["--out", str(out)]
        _refused(capsys, ["sweep", str(suite), f"{flag}={value}", *target, "--quiet"])


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
def test_fuzzed_max_batch_flags_are_refused(
    capsys: pytest.CaptureFixture[str],
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
    _refused(capsys, ["max-batch", "--model", "mlp", f"{flag}={value}"])


@FUZZ
@given(saved=st.dictionaries(st.sampled_from([*VALID, "budget", "seeds"]), _values, max_size=4))
def test_fuzzed_saved_suites_cannot_be_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], saved: dict[str, Any]
) -> None:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "suite.json").write_text(
        json.dumps({**VALID, **saved, "models": saved.get("models", 3)})
    )
    _refused(capsys, ["sweep", "--resume", str(run), "--quiet"])
