"""The issue's acceptance on the CPU: a sweep with an injected out-of-memory point (under
--max-memory), an injected crash and an injected hang finishes, records each with its status,
and measures every other point."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from isolation import cap_text, rows

from gpubench.cli import main

FAULTS = """
name = "faults"
models = ["mlp", "fault_workloads:segfault", "fault_workloads:raises", "fault_workloads:hungry"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [2, 1024, 4096]
precisions = ["fp32"]
optimizers = ["sgd"]
"""


def test_a_sweep_survives_oom_crash_and_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "faults.toml"
    suite.write_text(FAULTS)
    out = tmp_path / "run"
    args = ["sweep", str(suite), "--out", str(out), "--quiet", "--steps", "2"]
    # No short point timeout: points that must end ok may be slow on a loaded machine.
    assert main([*args, "--max-memory", cap_text()]) == 0
    got = {(r["model"].removeprefix("fault_workloads:"), r["batch_size"]): r for r in rows(out)}
    assert len(got) == len(rows(out)) == 12, "every point exactly once"
    status = {k: r["status"] for k, r in got.items()}
    assert status == {
        **{("mlp", b): "ok" for b in (2, 1024, 4096)},
        **{("segfault", b): "error" for b in (2, 1024, 4096)},
        **{("raises", b): "error" for b in (2, 1024, 4096)},
        ("hungry", 2): "ok",
        ("hungry", 1024): "oom",
        ("hungry", 4096): "oom",
    }
    assert all("signal SIGSEGV" in got["segfault", b]["error"] for b in (2, 1024, 4096))
    # an exception's traceback is kept in results.jsonl, down to the line that raised
    raised = got["raises", 2]
    assert raised["error"] == "ValueError: injected failure in forward"
    assert raised["traceback"].startswith("Traceback (most recent call last)")
    assert 'fault_workloads.py", line' in raised["traceback"]
    assert "can't allocate memory" in got["hungry", 1024]["error"]
    assert got["hungry", 4096]["error"] == "skipped: B=1024 ran out of memory"
    assert got["hungry", 4096]["point_time_s"] is None, "a skipped point is never tried"
    assert all(got["mlp", b]["steps_measured"] == 2 for b in (2, 1024, 4096))
    assert "traceback" not in (out / "results.csv").read_text().splitlines()[0].split(",")
    printed = capsys.readouterr().out
    assert "error" in printed and "skipped" in printed


def test_a_hung_point_is_a_timeout_row_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # Only points that never end run under the short timeout: its outcome is not a race.
    out = tmp_path / "run"
    args = ["sweep", "--models", "fault_workloads:hang", "--size", "tiny", "--devices", "cpu"]
    args += [
        "--precisions",
        "fp32",
        "--optimizers",
        "sgd",
        "--batch-sizes",
        "2,4",
        "--out",
        str(out),
        "--quiet",
        "--point-timeout",
        "1",
    ]
    assert main(args) == 0
    got = rows(out)
    assert [r["status"] for r in got] == ["timeout", "timeout"]
    assert all("no result within 1 s (--point-timeout)" in r["error"] for r in got)


AUTO = """
name = "auto"
models = ["fault_workloads:hungry"]
size = "tiny"
devices = ["cpu"]
batch_sizes = "auto"
precisions = ["fp32"]
optimizers = ["sgd"]
"""


def test_auto_batch_sizes_are_the_powers_of_two_that_fit(tmp_path: Path) -> None:
    suite = tmp_path / "auto.toml"
    suite.write_text(AUTO)
    out = tmp_path / "run"
    args = ["sweep", str(suite), "--out", str(out), "--quiet", "--steps", "1"]
    assert main([*args, "--max-memory", cap_text()]) == 0
    found = json.loads((out / "maxbatch.json").read_text())
    (search,) = found.values()
    largest = search["largest_batch"]
    probes = [(p["batch_size"], p["status"]) for p in search["probes"]]
    assert probes[-1] == (2 * largest, "oom") and all(s == "ok" for _, s in probes[:-1])
    assert [b for b, _ in probes] == [2**i for i in range(len(probes))]
    batches = [r["batch_size"] for r in rows(out)]
    assert batches == [2**i for i in range(largest.bit_length())]
    assert Counter(r["status"] for r in rows(out))["ok"] >= len(batches) - 1
    # a resumed sweep plans the same points from maxbatch.json, without probing again
    before = (out / "maxbatch.json").read_bytes()
    assert main(["sweep", "--resume", str(out), "--quiet", "--max-memory", cap_text()]) == 0
    assert (out / "maxbatch.json").read_bytes() == before and len(rows(out)) == len(batches)
