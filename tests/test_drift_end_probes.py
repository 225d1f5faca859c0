"""The reference probes at a run's end (issue 52): a sweep measures them again after its
confirmation (env.json's end_probes, beside the start's), and compare's drift takes each probe's
larger move, start against start or end against end; a folder from before reads as it did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpubench.config.errors import ConfigError
from gpubench.report import drift
from gpubench.store import env


def _probes(tflops: float, gb_per_s: float) -> dict[str, Any]:
    return {
        "matmul_peaks": {"cpu": {"fp32": {"measured_tflops": tflops, "dtype": "float32"}}},
        "memory_bandwidth": {"cpu": {"gb_per_s": gb_per_s}},
    }


def _folder(root: Path, name: str, start: dict[str, Any], end: dict[str, Any] | None) -> Path:
    folder = root / name
    folder.mkdir()
    captured = {"hostname": "h", **start}
    if end is not None:
        captured[env.END_PROBES] = {"captured_at": "2026-12-02T08:00:00+00:00", **end}
    (folder / env.ENV_FILE).write_text(json.dumps(captured))
    return folder


def test_the_larger_of_the_start_and_end_moves_is_the_probe_drift(tmp_path: Path) -> None:
    # the machine moved little between the starts and 1.5x between the ends
    a = _folder(tmp_path, "a", _probes(0.1, 10.0), _probes(0.1, 10.0))
    b = _folder(tmp_path, "b", _probes(0.11, 10.0), _probes(0.1, 15.0))
    moved = drift.between(a, b)
    assert moved.probe == pytest.approx(1.5) and moved.probes == 2 and moved.at_end == 2
    assert "2 at both ends" in moved.describe()
    # and where the starts moved more, they count
    c = _folder(tmp_path, "c", _probes(0.2, 10.0), _probes(0.1, 11.0))
    assert drift.between(a, c).probe == pytest.approx(2.0)
    assert drift.between(c, a).probe == pytest.approx(2.0)


def test_a_folder_without_end_probes_reads_as_before(tmp_path: Path) -> None:
    old = _folder(tmp_path, "old", _probes(0.1, 10.0), None)
    new = _folder(tmp_path, "new", _probes(0.12, 10.0), _probes(0.3, 30.0))
    moved = drift.between(old, new)
    assert moved.probe == pytest.approx(1.2) and moved.probes == 2 and moved.at_end == 0
    assert "at both ends" not in moved.describe()
    assert drift.probes(env.read(old), end=True) == {}


def test_end_probes_of_the_wrong_shape_name_the_key(tmp_path: Path) -> None:
    bad = _folder(tmp_path, "bad", _probes(0.1, 10.0), None)
    captured = json.loads((bad / env.ENV_FILE).read_text())
    captured[env.END_PROBES] = {"memory_bandwidth": {"cpu": {"gb_per_s": "fast"}}}
    (bad / env.ENV_FILE).write_text(json.dumps(captured))
    with pytest.raises(ConfigError, match="end_probes"):
        env.read(bad)
    with pytest.warns(UserWarning, match="end_probes"):
        assert env.END_PROBES not in env.read(bad, skip_odd=True)


def test_a_sweep_measures_the_probes_again_after_its_confirmation(finished_sweep: Path) -> None:
    captured = env.read(finished_sweep)
    start, end = drift.probes(captured), drift.probes(captured, end=True)
    assert ("bandwidth", "cpu") in end and ("matmul", "cpu", "fp32") in end
    assert end.keys() == start.keys()
    assert captured[env.END_PROBES]["captured_at"] >= captured["captured_at"]
    phases = json.loads((finished_sweep / "phases.json").read_text())["phases"]
    names = [p["phase"] for p in phases]
    assert names.index("end probes") > names.index("confirmation")
