"""Matmul calibration and its caches, the datasheet table, and env capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gpubench.probes import calibration, datasheet
from gpubench.store import env


def test_cpu_peak_is_measured_once_then_served_from_the_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    calibration.clear_memo()
    peak = calibration.matmul_peak("cpu", "fp32")
    assert peak is not None and peak.source == "measured"
    assert peak.tflops > 0 and peak.n >= 128 and peak.dtype == "float32"
    assert calibration.matmul_peak("cpu", "fp32") is peak  # in-process
    calibration.clear_memo()
    again = calibration.matmul_peak("cpu", "fp32")  # a new process would read the disk cache
    assert again is not None and again.source == "cache" and again.tflops == peak.tflops
    stored = json.loads(calibration.cache_file().read_text())
    assert calibration.device_key(torch.device("cpu")) in stored
    calibration.clear_memo()


def test_a_corrupt_cache_is_remeasured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    calibration.clear_memo()
    calibration.cache_file().write_text("{not json")
    peak = calibration.matmul_peak("cpu", "fp32")
    assert peak is not None and peak.source == "measured"
    assert json.loads(calibration.cache_file().read_text())  # rewritten whole
    calibration.clear_memo()


@pytest.mark.parametrize("entry", [{"future_field": 1}, {"tflops": 1.0}])
def test_a_cache_entry_of_another_version_is_remeasured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, object]
) -> None:
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    calibration.clear_memo()
    first = calibration.matmul_peak("cpu", "fp32")
    assert first is not None
    key = calibration.device_key(torch.device("cpu"))
    stored = json.loads(calibration.cache_file().read_text())
    stored[key]["fp32"] = {**stored[key]["fp32"], **entry}
    if "future_field" not in entry:
        stored[key]["fp32"] = entry  # required fields missing
    calibration.cache_file().write_text(json.dumps(stored))
    calibration.clear_memo()
    peak = calibration.matmul_peak("cpu", "fp32")
    assert peak is not None and peak.source == "measured"
    calibration.clear_memo()


def test_the_cpu_key_names_the_thread_count() -> None:
    key = calibration.device_key(torch.device("cpu"))
    assert f"threads={torch.get_num_threads()}" in key and torch.__version__ in key


def test_unsupported_precision_has_no_peak() -> None:
    assert calibration.matmul_peak("cpu", "tf32") is None


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
    ],
)
def test_datasheet_lookup(name: str, label: str) -> None:
    entry = datasheet.lookup(name)
    assert entry is not None and entry[0] == label


def test_datasheet_knows_nothing_it_was_not_told() -> None:
    assert datasheet.lookup("NVIDIA A10G") is None  # not an A10, not an A100
    assert datasheet.lookup("NVIDIA H100 NVL") is None
    # products whose names contain a known one: only an exact name is that product
    for other in ("NVIDIA RTX A1000", "NVIDIA RTX A1000 6GB Laptop GPU", "NVIDIA A100X"):
        assert datasheet.lookup(other) is None, other
    assert datasheet.lookup("NVIDIA GeForce RTX 4090 D") is None
    assert datasheet.lookup("NVIDIA GeForce RTX 3090 Ti") is None
    assert datasheet.lookup("NVIDIA L40") is None and datasheet.lookup("NVIDIA L4") is not None
    assert datasheet.peak_tflops("Tesla V100-SXM2-16GB", "bf16") is None  # Volta has no bf16
    assert datasheet.peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.4


def test_env_capture_records_versions_threads_nvml_and_peaks() -> None:
    info = env.capture(["cpu"], ["fp32", "tf32", "bf16"])
    assert info["torch"]["version"] == torch.__version__
    assert info["cpu"]["torch_threads"] == torch.get_num_threads()
    assert info["nvml"]["available"] in (True, False)
    if not info["nvml"]["available"]:
        assert info["nvml"]["reason"]
    peaks = info["matmul_peaks"]["cpu"]
    assert set(peaks) == {"fp32", "bf16"}  # tf32 is CUDA-only
    assert all(p["measured_tflops"] > 0 and p["datasheet_tflops"] is None for p in peaks.values())
    json.dumps(info)  # env.json must serialise


@pytest.mark.gpu
def test_cuda_peaks_sit_below_the_datasheet() -> None:
    name = torch.cuda.get_device_name()
    for prec in ("fp32", "tf32", "bf16", "fp16"):
        peak = calibration.matmul_peak("cuda", prec)
        sheet = datasheet.peak_tflops(name, prec)
        if peak is None or sheet is None:
            continue
        assert 0.3 * sheet < peak.tflops < 1.05 * sheet, (prec, peak.tflops, sheet)


def _keep_many(file: Path, who: str, count: int) -> None:
    """`count` entries of its own kept in `file`, one write each (a process of the test below)."""
    for i in range(count):
        peak = calibration.Peak(1.0, 512, "float32", "2026-12-02T00:00:00+00:00", "measured")
        calibration.keep(file, (who, str(i)), peak)


def test_two_processes_keeping_calibrations_at_once_drop_none(tmp_path: Path) -> None:
    import multiprocessing

    # each reads the cache, adds its entry and writes it back: without the lock the later
    # writer dropped what the other had added in between
    file = tmp_path / "peaks.json"
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_keep_many, args=(file, who, 150)) for who in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    data = json.loads(file.read_text())
    assert {who: len(data[who]) for who in "ab"} == {"a": 150, "b": 150}
