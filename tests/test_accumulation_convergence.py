"""Issue 25: convergence runs accept accumulation. On the shipped digits data an accumulated run's
learning curve matches the unaccumulated one of the same effective batch, far within the spread
between seeds (the MLP has no batch-dependent layer, so the gradients are the same sums)."""

from __future__ import annotations

from typing import Any

import pytest

from gpubench.config.convergence import Convergence
from gpubench.config.spec import Point, SweepSpec
from gpubench.harness.train import Trainer
from gpubench.science import convergence
from gpubench.science.convergence import train_point

# SGD, whose update scales with the gradient: a wrong loss scaling (no 1/k) moves the curve by
# several times the seeds' spread (AdamW would hide it: its update is scale-free)
CONV = Convergence(
    max_steps=40, eval_every_steps=10, eval_rel_gap=0.0, eval_samples=256, noise_every_steps=0
)


def point(seed: int, accumulate: int = 1, batch: int = 64, **kw: Any) -> Point:
    return Point(
        "mlp", "tiny", "cpu", "fp32", "sgd", batch, seed, "device",
        lr_scaling="none", accumulate=accumulate, **kw,
    )  # fmt: skip


def losses(row: dict[str, Any]) -> list[float]:
    assert row["status"] == "ok", row["error"]
    return [float(c["eval_loss"]) for c in row["curve"]]


def test_an_accumulated_curve_matches_the_unaccumulated_one_within_the_seeds_spread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[Trainer] = []
    make = convergence.make_trainer

    def recorded(*args: Any, **kwargs: Any) -> Trainer:  # the real trainer, kept to be read
        built.append(make(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(convergence, "make_trainer", recorded)
    seeds = (0, 1)
    plain = {s: train_point(point(s), CONV) for s in seeds}
    accumulated = {s: train_point(point(s, accumulate=4), CONV) for s in seeds}
    # the accumulated runs stepped in 4 micro-batches (the curves alone could not tell)
    assert [t.accumulate for t in built] == [1, 1, 4, 4]
    row = accumulated[0]
    assert (row["micro_batch_size"], row["accumulation_steps"]) == (16, 4)
    assert row["samples_per_step"] == 64 and row["steps_measured"] == 40
    assert [c["samples"] for c in row["curve"]][-1] == 40 * 64  # effective samples
    curves = {s: losses(r) for s, r in plain.items()}
    spread = [max(v) - min(v) for v in zip(*curves.values(), strict=True)]
    assert max(spread) > 0.01, spread  # the seeds do differ: the spread is a yardstick
    for s in seeds:
        for i, (a, b) in enumerate(zip(losses(accumulated[s]), curves[s], strict=True)):
            # the same seed's curves agree to a tenth of the seeds' spread at every evaluation
            assert abs(a - b) <= 0.1 * spread[i] + 1e-4, (s, i, a, b, spread)


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"accumulate": 3}, "batch size 64 does not split into accumulate 3"),
        ({"accumulate": 2, "checkpoint": "blocks"}, "convergence runs do not checkpoint"),
    ],
)
def test_a_point_convergence_cannot_take_is_an_unsupported_row(
    kw: dict[str, Any], why: str
) -> None:
    row = train_point(point(0, **kw), CONV)
    assert row["status"] == "unsupported" and why in row["error"]


def test_a_convergence_sweep_has_a_point_per_accumulation() -> None:
    spec = SweepSpec(
        name="x",
        mode="convergence",
        models=("mlp",),
        devices=("cpu",),
        batch_sizes=(256,),
        optimizers=("sgd",),
        seeds=(0, 1),
        accumulate=(1, 4),
    )
    got = sorted((p.accumulate, p.seed) for p in spec.points())
    assert got == [(1, 0), (1, 1), (4, 0), (4, 1)]
