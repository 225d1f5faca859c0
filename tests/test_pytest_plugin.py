"""The users' `gpubench` fixture, run in a test suite of its own through pytester."""

from __future__ import annotations

import json
import statistics
from importlib import metadata
from pathlib import Path

import pytest
import torch

from gpubench import models
from gpubench.cli.pytest_plugin import nvidia_driver_version
from gpubench.harness.stepbench import SMOKE_BUDGET, benchmark_step
from gpubench.store.benchjson import rows_from_benchmark_json

# Running from a checkout, the plugin is loaded by name; once gpubench is installed its pytest11
# entry point loads it, and naming it again would register the module twice.
INSTALLED = any(ep.name == "gpubench" for ep in metadata.entry_points(group="pytest11"))
PLUGIN_ARGS = () if INSTALLED else ("-p", "gpubench.cli.pytest_plugin")

USER_TEST = """
import os
import time
import torch
from torch import nn
from torch.nn import functional as F
from gpubench import Budget

BUDGET = Budget.fixed(steps=5, warmup_steps=2)


def make_batch(batch_size, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(batch_size, 16, generator=g, device=device)
    return x, (x.sum(dim=1) > 0).long()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        time.sleep(float(os.environ.get("SLEEP_S", "0")))  # the gate test's injected slowdown
        return self.body(x)


def test_net_step(gpubench):
    row = gpubench(Net(), 8, precision="fp32", optimizer="adamw", device="cpu",
                   make_batch=make_batch, loss_fn=F.cross_entropy, budget=BUDGET)
    print("ROW", row["steps_measured"], row["step_time_s"], row["model"])
    assert row["samples_per_s"] > 0
"""


@pytest.fixture(scope="module", autouse=True)
def _torch_fully_imported() -> None:
    """Run a training step here first. An optimizer's first step imports torch._dynamo (about
    900 modules); pytester drops the modules an in-process run imported, and torch cannot
    import some of them twice (their TORCH_LIBRARY registrations persist)."""
    workload = models.build("mlp", "tiny")
    benchmark_step(workload, 2, device="cpu", optimizer="adamw", budget=SMOKE_BUDGET)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # the plugin module is already imported here, so pytest cannot assert-rewrite it: say so once
    quiet = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
    return pytester.runpytest(*PLUGIN_ARGS, *quiet, "-p", "no:cacheprovider", "-s", *args)


def test_fixture_records_the_harness_step_times(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    result = _run(pytester, "--benchmark-json=out.json")
    result.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "out.json").read_text())
    (bench,) = doc["benchmarks"]
    info, stats = bench["extra_info"], bench["stats"]
    # pytest-benchmark's rounds are exactly gpubench's measured steps, warm-up excluded
    assert stats["rounds"] == info["steps_measured"] == len(stats["data"]) == 5
    assert info["warmup_steps"] == 2
    assert stats["median"] == pytest.approx(statistics.median(stats["data"]))
    assert stats["median"] == pytest.approx(info["step_time_s"])
    assert info["samples_per_s"] == pytest.approx(8 / stats["median"])
    assert info["model"] == "Net" and info["device"] == "cpu" and info["optimizer"] == "adamw"
    assert info["torch_peak_allocated_bytes"] is None  # not measurable on the CPU: null, not 0
    assert bench["options"]["timer"] == "step_clock"
    assert doc["machine_info"]["gpubench"]["torch"] == torch.__version__
    assert doc["machine_info"]["gpubench"]["cpu"]["torch_threads"] == torch.get_num_threads()

    (row,) = rows_from_benchmark_json(pytester.path / "out.json")
    assert row["model"] == "Net" and row["batch_size"] == 8 and row["precision"] == "fp32"
    assert row["step_times_s"] == stats["data"]
    assert row["step_time_s"] == stats["median"]


def test_gpubench_tests_are_benchmarks_for_only_and_skip(pytester: pytest.Pytester) -> None:
    """pytest-benchmark's --benchmark-only runs a test that uses only the gpubench fixture (it
    is a benchmark) and skips the others; --benchmark-skip does the reverse."""
    pytester.makepyfile(
        test_plain="def test_plain():\n    assert 1 + 1 == 2\n",
        test_user=USER_TEST,
    )
    only = _run(pytester, "--benchmark-only", "--benchmark-json=out.json", "-rs")
    only.assert_outcomes(passed=1, skipped=1)
    only.stdout.fnmatch_lines(["*SKIPPED*test_plain.py*Skipping non-benchmark*"])
    (bench,) = json.loads((pytester.path / "out.json").read_text())["benchmarks"]
    assert bench["name"] == "test_net_step" and bench["stats"]["rounds"] == 5
    skip = _run(pytester, "--benchmark-skip", "-rs")
    skip.assert_outcomes(passed=1, skipped=1)
    skip.stdout.fnmatch_lines(["*SKIPPED*test_user.py*Skipping benchmark*"])


def test_the_readme_example_runs(pytester: pytest.Pytester) -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "ci-gate.md").read_text("utf-8")
    start = readme.index("# tests/test_train_speed.py")
    example = readme[start : readme.index("```", start)]
    pytester.makepyfile(test_train_speed=example)
    result = _run(pytester, "--benchmark-disable")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["* samples/s*"])


def test_disabled_benchmarks_run_one_step_as_a_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    result = _run(pytester, "--benchmark-disable")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*ROW 1 * Net*"])


def test_mistakes_and_unsupported_combinations(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest
        from torch import nn
        from gpubench import models

        def test_module_without_batches(gpubench):
            gpubench(nn.Linear(4, 2), 8, device="cpu")

        def test_tf32_on_the_cpu(gpubench):
            gpubench(models.build("mlp", "tiny"), 8, precision="tf32", device="cpu")

        def test_unknown_optimizer(gpubench):
            gpubench(models.build("mlp", "tiny"), 8, optimizer="lbfgs", device="cpu")
        """
    )
    result = _run(pytester, "--benchmark-disable", "-rs")
    result.assert_outcomes(failed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*ConfigError: an nn.Module (Linear) needs make_batch*",
            "*ConfigError: unknown optimizer 'lbfgs'; allowed: sgd, adam, adamw*",
            "*SKIPPED*unsupported here: tf32 is a CUDA tensor-core mode*",
        ],
        consecutive=False,
    )


def test_injected_slowdown_fails_the_compare_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's mechanics: a baseline, then the same test with 0.4 s slept in every step.
    A sleep, not extra work, so that no contention of this shared machine can hide it: the
    baseline's median step would have to exceed 0.4 s (it is about 1 ms) for the gate to pass."""
    pytester.makepyfile(test_user=USER_TEST)
    storage = f"file://{pytester.path / 'bench'}"
    base = _run(pytester, f"--benchmark-storage={storage}", "--benchmark-save=base")
    base.assert_outcomes(passed=1)
    monkeypatch.setenv("SLEEP_S", "0.4")
    slow = _run(
        pytester,
        f"--benchmark-storage={storage}",
        "--benchmark-compare=0001",
        "--benchmark-compare-fail=median:100%",
    )
    # (run in-process, pytester reports the exit status as 0; scripts/bench_gate.py checks the
    # real one, 1, from a subprocess)
    slow.stderr.fnmatch_lines(
        ["*Performance has regressed*", "*test_net_step*'median' has failed*> 100.0*"]
    )


def test_entry_point_loads_the_plugin_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed through its pytest11 entry point (a dist-info on the path, as pip writes it),
    the fixture works with no -p; naming the plugin too, before the entry points are loaded
    (-p) or after (PYTEST_PLUGINS), does not register it twice."""
    dist = pytester.path / "site" / "gpubench_entry-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gpubench-entry\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\ngpubench = gpubench.cli.pytest_plugin\n")
    monkeypatch.syspath_prepend(pytester.path / "site")
    pytester.makepyfile(test_user=USER_TEST)
    args = ("-W", "ignore::pytest.PytestAssertRewriteWarning", "--benchmark-disable")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    pytester.runpytest(*args, "-p", "gpubench.cli.pytest_plugin").assert_outcomes(passed=1)
    monkeypatch.setenv("PYTEST_PLUGINS", "gpubench.cli.pytest_plugin")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    # and the entry point's name turns it off
    monkeypatch.delenv("PYTEST_PLUGINS")
    pytester.runpytest(*args, "-p", "no:gpubench").assert_outcomes(errors=1)


def test_nvidia_driver_version_from_procfs(tmp_path: Path) -> None:
    proprietary = tmp_path / "a"
    proprietary.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    open_module = tmp_path / "b"
    open_module.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"
    )
    assert nvidia_driver_version(proprietary) == "550.54.15"
    assert nvidia_driver_version(open_module) == "570.86.15"
    assert nvidia_driver_version(tmp_path / "missing") is None


def test_benchmark_step_measures_as_a_sweep_point_does() -> None:
    """The fixture's step goes through the sweep's measurement: FLOPs from the counter (here
    a workload with no analytic count of its own), the same columns, the roof fraction apart
    from MFU (no datasheet peak on a CPU: null)."""
    from gpubench.probes import calibration
    from gpubench.store.row import COLUMNS

    w = models.build("mlp", "tiny")
    analytic = w.flops_per_sample
    w.flops_per_sample = None  # a user's model: gpubench must count its FLOPs itself
    info = benchmark_step(w, 8, device="cpu", budget=SMOKE_BUDGET).info
    peak = calibration.matmul_peak("cpu", "fp32")
    assert peak is not None and info["tflops"] > 0
    assert analytic is not None and info["flops_method"] is not None
    assert info["flops_per_step"] == pytest.approx(analytic * 8, rel=0.05)
    assert info["matmul_roof_fraction"] == pytest.approx(info["tflops"] / peak.tflops)
    assert info["mfu"] is None and info["datasheet_peak_tflops"] is None
    assert set(info) <= set(COLUMNS) and info["memory_activations_bytes"] > 0


def test_loads_cleanly_without_pytest_benchmark(pytester: pytest.Pytester) -> None:
    """With pytest-benchmark disabled (or not installed), the plugin's hook for it must not make
    pluggy refuse the plugin, other tests run as ever, and the fixture skips with the reason."""
    pytester.makepyfile(
        test_plain="def test_plain():\n    assert 1 + 1 == 2\n",
        test_user=USER_TEST,
    )
    result = _run(pytester, "-p", "no:benchmark", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*pytest-benchmark, which is not loaded*"])
