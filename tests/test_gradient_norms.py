"""science.gradient_norms' hooks give the norms of the step's own micro-batch gradients: checked
against each micro-batch's gradient taken alone, in float64, on a tiny model (milliseconds)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from gpubench.harness.train import Trainer
from gpubench.science.gradient_noise import PRECONDITION_FROM_STEP
from gpubench.science.gradient_norms import GradientNorms


def _trainer(optimizer: str) -> Trainer:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt: torch.optim.Optimizer = (
        torch.optim.AdamW(model.parameters(), lr=1e-2)
        if optimizer == "adamw"
        else torch.optim.SGD(model.parameters(), lr=1e-1)
    )
    return Trainer(model, opt, nn.functional.cross_entropy, torch.device("cpu"), None, None, "")


def _expected(trainer: Trainer, x: torch.Tensor, y: torch.Tensor, k: int, step: int) -> list[float]:
    """Each micro-batch's |g_i|^2 and the whole batch's |g|^2, raw then preconditioned by the
    optimizer's state as it is (before the step), all in float64."""
    model = trainer.model.double()
    inv = {}
    for group in trainer.optimizer.param_groups:
        for p in group["params"]:
            v = trainer.optimizer.state.get(p, {}).get("exp_avg_sq")
            if v is not None and step >= PRECONDITION_FROM_STEP:
                vhat = v.double() / (1 - group["betas"][1] ** step)
                inv[p] = 1 / (vhat.sqrt() + group["eps"])
    out: list[float] = []
    pre: list[float] = []
    for xs, ys in [*zip(x.chunk(k), y.chunk(k), strict=True), (x, y)]:
        grads = torch.autograd.grad(
            nn.functional.cross_entropy(model(xs.double()), ys), list(model.parameters())
        )
        out.append(sum(float(g.square().sum()) for g in grads))
        pre.append(
            sum(
                float((g * inv.get(p, 1.0)).square().sum())
                for p, g in zip(model.parameters(), grads, strict=True)
            )
        )
    trainer.model.float()
    return out + pre


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_the_hooks_norms_are_each_micro_batch_gradients_own(optimizer: str) -> None:
    trainer = _trainer(optimizer)
    norms = GradientNorms(trainer, splits=4)
    gen = torch.Generator().manual_seed(1)
    expected: list[list[float]] = []
    for step in range(PRECONDITION_FROM_STEP + 3):
        x, y = torch.randn(16, 6, generator=gen), torch.randint(0, 3, (16,), generator=gen)
        if step >= PRECONDITION_FROM_STEP - 1:  # before and after the preconditioner starts
            expected.append(_expected(trainer, x, y, 4, step))
            with norms.measuring(step):
                trainer.step(x, y)
        else:
            trainer.step(x, y)
    numbers, raw, pre = norms.steps(16)
    assert numbers == list(range(PRECONDITION_FROM_STEP - 1, PRECONDITION_FROM_STEP + 3))
    assert len(pre) == (len(raw) if optimizer == "adamw" else 0)
    for i, want in enumerate(expected):
        got = [*raw[i].micro_sq, raw[i].total_sq]
        if pre:
            got += [*pre[i].micro_sq, pre[i].total_sq]
        else:
            want = want[:5]
        assert raw[i].micro_samples == (4, 4, 4, 4)
        assert all(math.isclose(g, w, rel_tol=1e-5) for g, w in zip(got, want, strict=True)), (
            got,
            want,
        )
    if pre:  # the preconditioner is ones before Adam's 5th step, and not after
        assert math.isclose(pre[0].total_sq, raw[0].total_sq, rel_tol=1e-6)
        assert not math.isclose(pre[-1].total_sq, raw[-1].total_sq, rel_tol=1e-2)
