from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from gpubench import models
from gpubench.config.spec import Budget, Point
from gpubench.harness.point import measure_point
from gpubench.harness.step import prepare, unsupported_reason


def point(**kw: object) -> Point:
    base = dict(
        model="cnn",
        model_size="tiny",
        device="cpu",
        precision="fp32",
        optimizer="sgd",
        batch_size=4,
    )
    base.update(kw)
    return Point(**base)  # type: ignore[arg-type]


def test_speed_options_that_cannot_apply_are_unsupported_with_a_reason() -> None:
    assert "CUDA device" in (unsupported_reason(point(cuda_graph=True)) or "")
    mlp = models.build("mlp", "tiny")
    reason = unsupported_reason(point(model="mlp", channels_last=True), mlp)
    assert reason is not None and "no Conv2d" in reason
    assert unsupported_reason(point(channels_last=True), models.build("cnn", "tiny")) is None
    row = measure_point(point(model="mlp", channels_last=True), Budget.fixed(2, 1))
    assert row["status"] == "unsupported" and "Conv2d" in row["error"]


def test_channels_last_trains_the_cnn_in_that_layout() -> None:
    prepared = prepare(point(channels_last=True), models.build("cnn", "tiny"))
    x, _ = prepared.batches.next()
    assert x.is_contiguous(memory_format=torch.channels_last)
    conv = prepared.trainer.model.stem[0]
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert torch.isfinite(prepared.step())


def test_compiled_step_matches_eager_and_reports_compile_time() -> None:
    """torch.compile must compute the same training step as eager: same losses, step by step."""
    losses = {}
    for mode in ("eager", "compile"):
        torch.manual_seed(0)
        prepared = prepare(point(model="mlp", compile=mode), models.build("mlp", "tiny"))
        losses[mode] = torch.stack([prepared.step() for _ in range(5)])
    torch.testing.assert_close(losses["compile"], losses["eager"], rtol=1e-4, atol=1e-5)
    # The loop above compiled this model class already: in the same process a new instance
    # can reuse that compiled code, and then nothing is left to compile. A fresh cache makes the
    # measured point compile, whatever ran before it.
    torch._dynamo.reset()
    row = measure_point(point(model="mlp", compile="compile"), Budget.fixed(3, 2))
    assert row["status"] == "ok" and row["compile_time_s"] > 0
    eager = measure_point(point(model="mlp"), Budget.fixed(3, 2))
    assert eager["compile_time_s"] is None


def test_compile_time_is_the_compiling_step_beyond_a_steady_one() -> None:
    """The first warm-up step compiles: its own time less the median. The old figure (warm-up
    time beyond warm-up steps at the median, clipped to 0) read 0.0 where the median was slow."""
    from gpubench.harness.point import _compile_time
    from gpubench.harness.timing import Measurement, Stats

    times = [1.0] * 6  # a slow median: 3 warm-up steps at it cost more than the 2.0 s warm-up
    m = Measurement(3, 2.0, times, 6.0, Stats.of(times), False, [], first_step_s=1.5)
    compiled = point(model="mlp", compile="compile")
    assert _compile_time(compiled, m) == pytest.approx(0.5)
    assert _compile_time(point(model="mlp"), m) is None  # eager
    m.first_step_s = 0.9  # not slower than the median: nothing to attribute to compiling
    assert _compile_time(compiled, m) is None


@pytest.mark.gpu
@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
@pytest.mark.parametrize("model", ["mlp", "cnn", "transformer"])
def test_cuda_graph_step_trains_like_the_eager_step(model: str, optimizer: str) -> None:
    """Replays must compute what eager steps compute on the same batches. Graph capture ran
    3 warm-up steps on the first batch (and recorded, without running, a fourth)."""
    p = point(model=model, device="cuda", optimizer=optimizer, precision="bf16")
    torch.manual_seed(0)
    graphed = prepare(replace(p, cuda_graph=True), models.build(model, "tiny"))
    replayed = torch.stack([graphed.step() for _ in range(6)]).float().cpu()
    torch.manual_seed(0)
    eager = prepare(p, models.build(model, "tiny"))
    first = eager.batches.next()
    for _ in range(3):
        eager.trainer.step(*first)
    expected = torch.stack([eager.step() for _ in range(6)]).float().cpu()
    torch.testing.assert_close(replayed, expected, rtol=2e-2, atol=2e-2)
