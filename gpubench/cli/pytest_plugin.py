"""pytest plugin (entry point `gpubench`; `-p no:gpubench` turns it off): a `gpubench` fixture
that benchmarks one training step through pytest-benchmark.

gpubench times the steps (the sweep's warm-up, CUDA events and stopping rule): pytest-benchmark's
timer does not synchronise CUDA. The fixture hands pytest-benchmark a virtual clock
(`step_clock`, the test's `benchmark(timer=...)`) that advances only by the measured step times,
replayed through `benchmark.pedantic`, one round per step: its statistics, JSON files and
`--benchmark-compare(-fail)` then work on exactly the sweep's raw step times.
"""

from __future__ import annotations

import platform
import re
import sys
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpubench.config.errors import ConfigError
from gpubench.store import env

if TYPE_CHECKING:  # torch and the harness load when a test calls the fixture, not with pytest
    import torch
    from torch import nn

    from gpubench.config.spec import Budget
    from gpubench.models.workload import BatchMaker, Workload


class StepClock:
    """A clock that reads 0.0 at the start of a replayed round and the measured step time (s)
    at its end, so pytest-benchmark's `end - start` is exactly that step time."""

    def __init__(self) -> None:
        self._pending: deque[float] = deque()
        self._armed: float | None = None
        self.reads = 0

    def load(self, step_times_s: Iterable[float]) -> None:
        self._pending = deque(step_times_s)
        self._armed = None
        self.reads = 0

    def replay_one(self) -> None:
        """The benchmarked 'function': arms the next measured step time for the end read."""
        self._armed = self._pending.popleft()

    def read(self) -> float:
        self.reads += 1
        value, self._armed = (self._armed or 0.0), None
        return value


_CLOCK = StepClock()


def step_clock() -> float:
    """pytest-benchmark's timer for gpubench tests (seconds of measured device time)."""
    return _CLOCK.read()


class GpuBench:
    """The `gpubench` fixture's value: call it once per test to benchmark one training step."""

    def __init__(self, benchmark: Any) -> None:
        self.benchmark = benchmark

    def __call__(
        self,
        model: nn.Module | Workload,
        batch_size: int,
        *,
        precision: str = "fp32",
        optimizer: str = "sgd",
        device: str | torch.device = "auto",
        make_batch: BatchMaker | None = None,
        loss_fn: Any = None,
        tokens_per_sample: int | None = None,
        flops_per_sample: float | None = None,
        name: str | None = None,
        model_size: str | None = None,
        budget: Budget | None = None,
        data: str = "device",
        seed: int = 0,
        lr: float | None = None,
    ) -> dict[str, Any]:
        """Benchmark one training step of `model` and record it with pytest-benchmark: `model`
        is a gpubench Workload, or an nn.Module together with `make_batch(batch_size,
        device, seed) -> (inputs, targets)` (made on `device`) and `loss_fn(outputs, targets)`.
        The model is moved to `device` (`auto`: CUDA where present) and trained in place.
        `budget` defaults to the sweep's default; with --benchmark-disable one warm-up step and
        one timed step run instead. Returns the result as a gpubench row (step_time_s,
        samples_per_s, ...), also stored in the benchmark's extra_info. An unsupported
        combination skips the test with the reason.
        """
        from gpubench.harness.stepbench import SMOKE_BUDGET, Unsupported, benchmark_step

        workload = _as_workload(
            model, make_batch, loss_fn, tokens_per_sample, flops_per_sample, name
        )
        enabled = bool(self.benchmark.enabled)
        try:
            result = benchmark_step(
                workload,
                batch_size,
                device=device,
                precision_name=precision,
                optimizer=optimizer,
                budget=(budget if enabled else SMOKE_BUDGET),
                data=data,
                seed=seed,
                model_size=model_size,
                lr=lr,
            )
        except Unsupported as e:
            pytest.skip(f"unsupported here: {e}")
        times = result.measurement.step_times_s
        self.benchmark.extra_info.update(result.info)
        if self.benchmark.group is None:  # one table per model on a device, unless the test says
            size = f"/{model_size}" if model_size else ""
            self.benchmark.group = f"{workload.name}{size} {result.info['device']}"
        _CLOCK.load(times)
        self.benchmark.pedantic(_CLOCK.replay_one, rounds=len(times), iterations=1)
        if enabled and _CLOCK.reads != 2 * len(times):
            raise RuntimeError(
                "pytest-benchmark did not time this test with gpubench's step clock "
                f"(read {_CLOCK.reads} times for {len(times)} steps); another "
                "benchmark(timer=...) marker or hook replaced it"
            )
        return {**result.info, "step_times_s": list(times)}


def _as_workload(
    model: nn.Module | Workload,
    make_batch: BatchMaker | None,
    loss_fn: Any,
    tokens_per_sample: int | None,
    flops_per_sample: float | None,
    name: str | None,
) -> Workload:
    from torch import nn

    from gpubench.models.workload import Workload

    if isinstance(model, Workload):
        given = [k for k, v in (("make_batch", make_batch), ("loss_fn", loss_fn)) if v is not None]
        if given:
            raise ConfigError(
                f"{', '.join(given)} given with a Workload, which has its own; "
                "allowed: a Workload alone, or an nn.Module with make_batch and loss_fn"
            )
        return model
    if not isinstance(model, nn.Module):
        raise ConfigError(
            f"cannot benchmark a {type(model).__name__}; allowed: an nn.Module or a Workload"
        )
    if make_batch is None or loss_fn is None:
        raise ConfigError(
            f"an nn.Module ({type(model).__name__}) needs make_batch(batch_size, device, seed) "
            "and loss_fn(outputs, targets); one or both is missing"
        )
    return Workload(
        name=name or type(model).__name__,
        model=model,
        make_batch=make_batch,
        loss_fn=loss_fn,
        tokens_per_sample=tokens_per_sample,
        flops_per_sample=flops_per_sample,
    )


# The two names this module is loaded under: its pytest11 entry point, and its module name.
_NAMES = ("gpubench", "gpubench.cli.pytest_plugin")


def pytest_plugin_registered(plugin: object, plugin_name: str, manager: Any) -> None:
    """Loaded under one of its names, block the other: pluggy refuses a module registered twice
    under two names, which is what loading it both ways (installed, and named with -p) does."""
    if plugin is sys.modules[__name__] and plugin_name in _NAMES:
        for other in _NAMES:
            if other != plugin_name and manager.get_plugin(other) is None:
                manager.set_blocked(other)


# pytest-benchmark's plugin and fixture name: without the plugin (not installed, or
# `-p no:benchmark`) this one still loads, and the fixture skips its tests with the reason.
_BENCHMARK = "benchmark"


def _benchmark_active(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin(_BENCHMARK)


@pytest.fixture
def gpubench(request: pytest.FixtureRequest) -> GpuBench:
    """Benchmark one training step with gpubench's harness, recorded by pytest-benchmark."""
    if not _benchmark_active(request.config):
        pytest.skip(
            "the gpubench fixture records through pytest-benchmark, which is not loaded "
            "(install pytest-benchmark, or drop -p no:benchmark)"
        )
    return GpuBench(request.getfixturevalue(_BENCHMARK))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make every test that uses the `gpubench` fixture a benchmark in pytest-benchmark's eyes
    (--benchmark-only, --benchmark-skip): it tells one by `benchmark` among the item's fixture
    names. The fixture cannot take `benchmark` as an argument (it would fail to load without
    pytest-benchmark), so this hook, run first, adds the name to the fixture closure; pytest
    then sets it up, and the fixture's `getfixturevalue` gets that same instance."""
    if not _benchmark_active(config):
        return
    for item in items:
        names = getattr(item, "fixturenames", None)
        if isinstance(names, list) and "gpubench" in names and _BENCHMARK not in names:
            names.append(_BENCHMARK)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Make pytest-benchmark time gpubench tests with the step clock: a `benchmark` marker,
    put first (the closest marker wins) and keeping any settings of the test's own marker."""
    if "gpubench" not in getattr(item, "fixturenames", ()) or not _benchmark_active(item.config):
        return  # not a gpubench test, or one the fixture skips
    own = item.get_closest_marker("benchmark")
    kwargs = {**(own.kwargs if own else {}), "timer": step_clock}
    item.add_marker(pytest.mark.benchmark(**kwargs), append=False)


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook: absent without it
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """What makes a training benchmark reproducible, in pytest-benchmark's machine info."""
    machine_info["gpubench"] = machine_summary()


def machine_summary() -> dict[str, Any]:
    """GPUs, NVIDIA driver, CUDA, cuDNN and torch versions, math switches and CPU threads."""
    torch_info = env.torch_info()
    return {
        "torch": torch_info.pop("version"),
        "cuda": torch_info.pop("cuda"),
        "cudnn": torch_info.pop("cudnn"),
        "nvidia_driver": nvidia_driver_version(),
        "gpus": env.gpu_info(),
        "cpu": env.cpu_info(),
        "math": torch_info,
        "python": platform.python_version(),
        "gpubench_commit": env.git_commit(),
    }


def nvidia_driver_version(path: Path = Path("/proc/driver/nvidia/version")) -> str | None:
    """The NVIDIA kernel driver's version (e.g. '550.54.15'), from procfs (no NVML needed);
    None where none is loaded."""
    try:
        first_line = path.read_text(encoding="utf-8", errors="replace").partition("\n")[0]
    except OSError:
        return None
    # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ...": the first
    # dotted number (the open module words it differently).
    match = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", first_line)
    return match.group(1) if match else None


__all__ = ["GpuBench", "gpubench", "machine_summary", "step_clock"]
