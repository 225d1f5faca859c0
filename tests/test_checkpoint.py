"""Activation checkpointing of the models' repeated blocks (issue 25): the same gradients as
without it, fewer saved activations, and the FLOP counter counting the recomputation."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gpubench import models
from gpubench.config.spec import Budget, Point
from gpubench.harness.checkpointing import checkpoint_blocks
from gpubench.harness.point import measure_point
from gpubench.harness.step import unsupported_reason
from gpubench.harness.train import make_trainer
from gpubench.models.blocks import repeated_blocks
from gpubench.probes import flops
from gpubench.probes.breakdown import SavedActivations
from gpubench.probes.step_count import CountStep

CPU = torch.device("cpu")


def _step(model: str, checkpoint: bool, accumulate: int = 1) -> tuple[list[torch.Tensor], int, int]:
    """One SGD step of `model`/tiny on one batch from the same initial weights: its gradients,
    the activation bytes it saved for backward, and its counted FLOPs."""
    torch.manual_seed(0)
    workload = models.build(model, "tiny")
    if checkpoint:
        assert checkpoint_blocks(workload.model) > 0
    trainer = make_trainer(workload, CPU, "fp32", "sgd", accumulate=accumulate)
    x, y = workload.batch(8, CPU, seed=3)
    with CountStep() as counted, SavedActivations(trainer.model) as saved:
        trainer.step(x, y)
    assert counted.result is not None
    grads = [p.grad.clone() for p in trainer.model.parameters()]  # type: ignore[union-attr]
    return grads, saved.bytes, counted.result.flops.total


@pytest.mark.parametrize("model", ["transformer", "cnn"])
def test_checkpointed_gradients_equal_unchecked_ones(model: str) -> None:
    plain, plain_saved, _ = _step(model, checkpoint=False)
    checked, checked_saved, _ = _step(model, checkpoint=True)
    for got, want in zip(checked, plain, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # the blocks hold only their inputs: what they saved inside is recomputed instead
    assert checked_saved < 0.6 * plain_saved


def test_checkpointing_composes_with_accumulation() -> None:
    plain, _, _ = _step("transformer", checkpoint=False)
    checked, _, _ = _step("transformer", checkpoint=True, accumulate=4)
    for got, want in zip(checked, plain, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_the_flops_count_the_recomputed_forward_of_the_blocks() -> None:
    _, _, plain = _step("transformer", checkpoint=False)
    torch.manual_seed(0)
    workload = models.build("transformer", "tiny")
    x, _ = workload.batch(8, CPU, seed=3)
    # the forward alone, by module, attention on the CPU included (as CountStep counts it)
    with FlopCounterMode(display=False, custom_mapping=dict(flops.MISSED)) as forward:
        workload.model(x)
    blocks = forward.get_flop_counts()["GPT.blocks.0"]
    blocks_forward = sum(blocks.values())
    checkpoint_blocks(workload.model)
    trainer = make_trainer(workload, CPU, "fp32", "sgd")
    x, y = workload.batch(8, CPU, seed=3)
    with CountStep() as step:
        trainer.step(x, y)
    assert step.result is not None
    counted = step.result.flops
    extra = counted.total - plain
    assert extra == counted.recomputed  # the counter sees exactly what was recomputed
    # MFU's FLOPs leave it out, and the scores the attention backward recomputes
    assert counted.model == plain - counted.attention_recomputed
    # the blocks' forward, less its last matmul: the recomputation stops once it has the tensors
    # backward needs (the last layer's input), and the block's output is not one of them
    out = workload.model.blocks[0].out
    last = 2 * 8 * 16 * out.in_features * out.out_features  # batch 8, 16 tokens
    assert extra == blocks_forward - last


def test_a_model_without_repeated_blocks_is_unsupported_with_the_reason() -> None:
    mlp = models.build("mlp", "tiny")
    assert repeated_blocks(mlp.model) == []
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4, checkpoint="blocks")
    assert "mlp has no" in (unsupported_reason(point, mlp) or "")
    row = measure_point(point, Budget.fixed(2, 1))
    assert row["status"] == "unsupported" and "repeated blocks" in row["error"]
    assert point.label() == "mlp/tiny cpu fp32 sgd B=4 (checkpoint blocks)"
    with pytest.raises(ValueError, match="no repeated blocks"):
        checkpoint_blocks(mlp.model)


def test_the_block_lists_of_the_reference_models() -> None:
    gpt = models.build("transformer", "small").model
    assert repeated_blocks(gpt) == list(gpt.blocks)  # type: ignore[arg-type]
    cnn = models.build("cnn", "small").model
    assert repeated_blocks(cnn) == list(cnn.layers)  # type: ignore[arg-type]
    # a wrapper is looked through; nested lists stay inside their block
    wrapped = nn.Sequential(nn.Linear(2, 2), nn.ModuleDict({"body": gpt}))
    assert repeated_blocks(wrapped) == list(gpt.blocks)  # type: ignore[arg-type]


def test_an_ecosystem_models_decoder_layers_are_its_blocks() -> None:
    pytest.importorskip("transformers", reason="could not import transformers")
    options = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, seq_len=16)
    grads = []
    for checkpoint in (False, True):
        torch.manual_seed(0)  # the same weights and dropout masks (checkpoint replays the RNG)
        workload = models.build("hf:gpt2", **options)  # type: ignore[arg-type]
        found = repeated_blocks(workload.model)
        assert [type(b).__name__ for b in found] == ["GPT2Block", "GPT2Block"]
        if checkpoint:
            checkpoint_blocks(workload.model)
        trainer = make_trainer(workload, CPU, "fp32", "sgd")
        trainer.step(*workload.batch(2, CPU))
        grads.append([p.grad for p in trainer.model.parameters()])
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_compile_with_checkpointing_runs() -> None:
    # issue 28: the checkpoint's context_fn (the FLOP counter's recomputation context) made every
    # compiled checkpointed step fail ("context_fn ... must generate a tuple of two
    # TorchDispatchMode"); under compile the blocks take torch's default contexts instead
    point = Point("transformer", "tiny", "cpu", "fp32", "sgd", 4, checkpoint="blocks")
    compiled = measure_point(dataclasses.replace(point, compile="compile"), Budget.fixed(2, 2))
    assert compiled["status"] == "ok", compiled["error"]
    assert compiled["steps_measured"] == 2 and math.isfinite(compiled["loss_last"])
    # counted on the eager module, as the eager point counts, the recomputation included
    eager = measure_point(point, Budget.fixed(1, 2))
    assert compiled["flops_recomputed_per_step"] == eager["flops_recomputed_per_step"] > 0
    assert compiled["flops_per_step"] == eager["flops_per_step"]
