"""Gradient accumulation (issue 25): one optimizer step over k micro-batches equals one step on
the whole batch (models without batch-dependent layers), fp16's loss scaler included; the axis,
its refusals and its row columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gpubench import models
from gpubench.cli import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.config.validate import validate
from gpubench.harness.point import measure_workload
from gpubench.harness.step import unsupported_reason
from gpubench.harness.stepbench import benchmark_step
from gpubench.harness.train import Trainer, make_trainer
from gpubench.store.row import make_row

CPU = torch.device("cpu")


def _gradients(model: str, accumulate: int, batch: int = 8, scaled: bool = False) -> tuple:
    """The gradients and loss of one SGD step at `accumulate` micro-batches of one batch, from
    the same initial weights (`scaled`: under a GradScaler, as fp16 trains)."""
    torch.manual_seed(0)
    workload = models.build(model, "tiny")
    trainer = make_trainer(workload, CPU, "fp32", "sgd", accumulate=accumulate)
    if scaled:  # fp16's scaler, over fp32 math: the scaling alone is under test
        trainer = Trainer(**{**vars(trainer), "scaler": torch.amp.GradScaler("cpu")})
    x, y = workload.batch(batch, CPU, seed=3)
    loss = trainer.step(x, y)
    grads = [p.grad.clone() for p in trainer.model.parameters()]  # type: ignore[union-attr]
    return grads, loss


@pytest.mark.parametrize("model", ["mlp", "transformer"])
@pytest.mark.parametrize("accumulate", [2, 4])
def test_accumulated_gradients_equal_one_batchs(model: str, accumulate: int) -> None:
    whole, whole_loss = _gradients(model, 1)
    accumulated, loss = _gradients(model, accumulate)
    # fp32 sums of the same terms in another order: equal to a few ulps of the gradients' scale
    for got, want in zip(accumulated, whole, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(loss, whole_loss)  # the step's loss: the whole batch's mean


def test_the_loss_scaler_scales_each_micro_batch_and_unscales_once() -> None:
    whole, _ = _gradients("transformer", 1)
    scaled, _ = _gradients("transformer", 4, scaled=True)
    for got, want in zip(scaled, whole, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_fp16_accumulation_trains_like_one_batch_on_cuda() -> None:
    grads = []
    for k in (1, 4):
        torch.manual_seed(0)
        workload = models.build("transformer", "tiny")
        trainer = make_trainer(workload, torch.device("cuda"), "fp16", "sgd", accumulate=k)
        assert trainer.scaler is not None
        # a scale whose first step cannot overflow (the default 2**16 may skip it)
        trainer = Trainer(**{**vars(trainer), "scaler": torch.amp.GradScaler("cuda", 1024.0)})
        trainer.step(*workload.batch(8, "cuda", seed=3))
        grads.append([p.grad.float() for p in trainer.model.parameters()])  # type: ignore[union-attr]
    for got, want in zip(*grads, strict=True):
        # fp16 products summed in another order: within fp16's resolution of the gradients
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-3)


def test_batch_norm_is_the_known_exception() -> None:
    """The CNN normalises each micro-batch by its own statistics: its accumulated gradients
    are not the whole batch's (README: models with batch-dependent layers)."""
    whole, _ = _gradients("cnn", 1)
    accumulated, _ = _gradients("cnn", 4)
    assert any(
        not torch.allclose(a, w, rtol=1e-3, atol=1e-4)
        for a, w in zip(accumulated, whole, strict=True)
    )


def test_the_axis_makes_points_with_the_effective_batch() -> None:
    spec = SweepSpec("t", ("mlp",), "tiny", ("cpu",), (8,), accumulate=(1, 4))
    points = validate(spec).points()
    assert [(p.batch_size, p.accumulate) for p in points] == [(8, 1), (8, 4)]
    assert points[0].label() == "mlp/tiny cpu fp32 sgd B=8"
    assert points[1].label() == "mlp/tiny cpu fp32 sgd B=8 as 4 x 2"
    assert points[0].key() != points[1].key()
    assert Point.of(points[1].to_dict()) == points[1]


def test_a_batch_that_does_not_split_is_refused_up_front() -> None:
    spec = SweepSpec("t", ("mlp",), "tiny", ("cpu",), (8, 12), accumulate=(1, 8))
    with pytest.raises(ConfigError, match=r"batch size 12 .* accumulate 8"):
        validate(spec)
    with pytest.raises(ConfigError, match="invalid accumulate 0"):
        validate(SweepSpec("t", ("mlp",), accumulate=(0,)))
    with pytest.raises(ConfigError, match=r"batch size 6 .* accumulate 4"):
        benchmark_step(models.build("mlp", "tiny"), 6, device="cpu", accumulate=4)
    # "auto" batch sizes (resolved per device) and a strong-scaling rank's share meet it per point
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 8, accumulate=3)
    assert "batch size 8 does not split into accumulate 3" in (unsupported_reason(point) or "")
    strong = Point("mlp", "tiny", "cpu", "fp32", "sgd", 8, parallel="ddp", nproc=2)
    strong = Point(**{**strong.to_dict(), "scaling": "strong", "accumulate": 8})
    assert "batch size 4 does not split" in (unsupported_reason(strong) or "")


def test_convergence_runs_take_accumulation_but_not_checkpointing() -> None:
    spec = SweepSpec("t", ("mlp",), batch_sizes=(8,), mode="convergence", accumulate=(2,))
    assert validate(spec).accumulate == (2,)
    spec = SweepSpec("t", ("mlp",), batch_sizes=(8,), mode="convergence", checkpoint=("blocks",))
    with pytest.raises(ConfigError, match="checkpoint \\['blocks'\\] with mode 'convergence'"):
        validate(spec)


def test_suite_keys_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(
        'models = ["mlp"]\nbatch_sizes = [8]\naccumulate = [1, 2]\ncheckpoint = "blocks"\n'
    )
    spec = load_suite(suite)
    assert spec.accumulate == (1, 2) and spec.checkpoint == ("blocks",)
    suite.write_text('models = ["mlp"]\nbatch_sizes = [6]\naccumulate = [4]\n')
    with pytest.raises(ConfigError, match=r"line 3: .*batch size 6 .* accumulate 4"):
        load_suite(suite)
    for args, fragment in (
        (["--accumulate", "0"], "invalid accumulate 0"),
        (["--accumulate", "x"], "'x'"),
        (["--checkpoint", "all"], "unknown checkpoint mode 'all'"),
        (["--batch-sizes", "6", "--accumulate", "4"], "batch size 6 does not split"),
    ):
        out = tmp_path / "run"
        assert main(["sweep", "--models", "mlp", *args, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert fragment in err and len(err.splitlines()) == 1, err
        assert not out.exists()


def test_every_row_says_its_micro_batch() -> None:
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 8, accumulate=4)
    row = make_row(point, "oom", error="out of memory")
    assert (row["micro_batch_size"], row["accumulation_steps"], row["checkpoint"]) == (2, 4, "none")
    values, _ = measure_workload(point, models.build("mlp", "tiny"), Budget.fixed(2, 1), None)
    assert (values["micro_batch_size"], values["accumulation_steps"]) == (2, 4)
    assert values["samples_per_step"] == 8  # samples/s stays per effective sample


def test_a_sweep_over_both_axes_writes_the_new_columns(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["--models", "transformer", "--size", "tiny", "--devices", "cpu"]
    args += ["--precisions", "fp32", "--optimizers", "sgd", "--batch-sizes", "8"]
    args += ["--accumulate", "1,2", "--checkpoint", "none,blocks", "--steps", "2"]
    assert main(["sweep", *args, "--out", str(out), "--quiet", "--no-confirm", "--no-profile"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    got = {(r["accumulate"], r["checkpoint"]): r for r in rows}
    assert set(got) == {(1, "none"), (2, "none"), (1, "blocks"), (2, "blocks")}
    for (k, ck), r in got.items():
        assert r["status"] == "ok", r["error"]
        assert (r["micro_batch_size"], r["accumulation_steps"]) == (8 // k, k)
        assert r["samples_per_s"] == pytest.approx(8 / r["step_time_s"])
        assert (r["flops_recomputed_per_step"] > 0) == (ck == "blocks")
    # the same weights, batches and effective batch: the same losses, however it is split
    assert got[(2, "none")]["loss_last"] == pytest.approx(got[(1, "none")]["loss_last"], rel=1e-5)


def test_the_summary_names_the_split_and_the_checkpointing() -> None:
    from gpubench.cli.results_table import _options

    row = {"compile": "eager", "accumulate": 4, "micro_batch_size": 2, "checkpoint": "blocks"}
    assert _options(row) == "as 4 x 2, checkpoint blocks"
    assert _options({"compile": "eager", "accumulate": 1, "checkpoint": "none"}) == ""


def test_saved_activations_are_one_micro_batchs_not_the_sum() -> None:
    # each micro-batch's saved tensors are freed by its backward before the next forward: what
    # is held at once (memory_activations_bytes) is about one micro-batch's, half at k = 2
    from gpubench.probes.breakdown import SavedActivations

    def saved(accumulate: int) -> int:
        torch.manual_seed(0)
        workload = models.build("transformer", "tiny")
        trainer = make_trainer(workload, CPU, "fp32", "sgd", accumulate=accumulate)
        x, y = workload.batch(64, CPU, seed=3)
        with SavedActivations(trainer.model) as counted:
            trainer.step(x, y)
        return counted.bytes

    whole, half, quarter = saved(1), saved(2), saved(4)
    assert half == pytest.approx(whole / 2, rel=0.15)
    assert quarter == pytest.approx(whole / 4, rel=0.15)
