"""Host RSS, the memory breakdown and FLOP counting, on tiny real models on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from gpubench import models
from gpubench.harness.train import make_trainer
from gpubench.models import cnn, mlp, transformer
from gpubench.probes import breakdown, flops, memory
from gpubench.probes.step_count import CountStep

CPU = torch.device("cpu")


def test_host_peak_rss_sees_a_transient_allocation_and_resets_per_block() -> None:
    size = 200 * 2**20
    with memory.HostPeakRSS() as big:
        before = memory._status_kib("VmRSS")
        block = np.ones(size, dtype=np.uint8)  # touched, so resident
        del block
    with memory.HostPeakRSS() as small:
        pass
    assert big.peak_bytes is not None and before is not None
    assert big.peak_bytes >= before + size * 0.9
    assert big.scope == "block"  # Linux lets us reset the peak
    assert small.peak_bytes is not None and small.peak_bytes < big.peak_bytes - size * 0.5


def test_torch_peaks_are_null_on_the_cpu() -> None:
    with memory.TorchPeaks(CPU) as peaks:
        torch.ones(1000)
    assert peaks.allocated_bytes is None and peaks.reserved_bytes is None


@pytest.mark.parametrize(("optimizer", "state_per_param"), [("sgd", 1), ("adamw", 2)])
def test_breakdown_counts_parameters_gradients_and_optimizer_state(
    optimizer: str, state_per_param: int
) -> None:
    w = models.build("mlp", "tiny")
    trainer = make_trainer(w, CPU, "fp32", optimizer)
    trainer.step(*w.batch(8, CPU))
    b = breakdown.breakdown(trainer.model, trainer.optimizer)
    n = w.parameter_count()
    tensors = len(list(trainer.model.parameters()))
    assert b.parameters_bytes == 4 * n
    assert b.gradients_bytes == 4 * n
    step_counters = 4 * tensors if optimizer == "adamw" else 0  # Adam's float32 `step` per tensor
    assert b.optimizer_bytes == state_per_param * 4 * n + step_counters
    assert b.remainder_bytes(None) is None
    assert b.remainder_bytes(10 * b.model_state_bytes) == 9 * b.model_state_bytes


def test_saved_activations_count_each_saved_storage_once_and_skip_parameters() -> None:
    batch, width_in, hidden = 8, 32, 16
    model = nn.Sequential(nn.Linear(width_in, hidden), nn.ReLU(), nn.Linear(hidden, 4))
    x = torch.randn(batch, width_in)
    with breakdown.SavedActivations(model) as saved:
        out = model(x)
    out.sum().backward()
    # The first layer saves its input, ReLU its output, which the second layer saves again.
    assert saved.bytes == 4 * batch * (width_in + hidden)


def _count(name: str, size: str, batch: int) -> tuple[flops.StepFlops, float]:
    w = models.build(name, size)
    trainer = make_trainer(w, CPU, "fp32", "sgd")
    inputs, targets = w.batch(batch, CPU)  # made outside: its labelling teacher is a matmul
    with CountStep() as counted:
        trainer.step(inputs, targets)
    assert counted.result is not None and w.flops_per_sample is not None
    return counted.result.flops, w.flops_per_sample * batch


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_mlp_flops_equal_the_analytic_count(size: str) -> None:
    counted, analytic = _count("mlp", size, 4)
    cfg = mlp.PRESETS[size]
    shapes = cfg.layer_shapes()
    expected = 4 * (6 * sum(i * o for i, o in shapes) - 2 * shapes[0][0] * shapes[0][1])
    assert analytic == expected
    assert abs(counted.total - analytic) / analytic < 0.01
    assert counted.method == "FlopCounterMode" and counted.added == 0


def test_cnn_flops_equal_the_analytic_count() -> None:
    counted, analytic = _count("cnn", "tiny", 2)
    assert counted.total == pytest.approx(analytic, rel=0.01)
    assert cnn.training_flops_per_sample(cnn.PRESETS["tiny"]) * 2 == analytic


def test_transformer_flops_include_the_attention_the_counter_misses_on_the_cpu() -> None:
    batch = 2
    counted, analytic = _count("transformer", "tiny", batch)
    cfg = transformer.PRESETS["tiny"]
    t, d, layers = cfg.seq_len, cfg.width, cfg.layers
    # Full T x T scores: 2 matmuls forward, 5 backward (scores recomputed), 2*B*T*T*d each.
    assert counted.added == 7 * 2 * batch * t * t * d * layers
    assert counted.method == "FlopCounterMode+cpu_sdpa"
    # The analytic count takes the backward as twice the forward (4 attention matmuls, not 5).
    extra_backward_matmul = 2 * batch * t * t * d * layers
    assert counted.total == pytest.approx(analytic + extra_backward_matmul, rel=0.001)
    assert counted.total == pytest.approx(analytic, rel=0.05)
    # ... which is the recomputed score matrix: work the device did, not work the model needs
    assert counted.attention_recomputed == extra_backward_matmul
    assert counted.model == analytic


def test_the_cpu_attention_formula_fills_what_the_bare_counter_misses() -> None:
    q = k = v = torch.randn(2, 2, 8, 4, requires_grad=True)
    bare = torch.utils.flop_counter.FlopCounterMode(display=False)
    with bare:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    with CountStep() as ours:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert ours.result is not None
    assert bare.get_total_flops() == 0  # the reason the formulas exist
    assert ours.result.flops.total == 7 * 2 * (2 * 2) * 8 * 8 * 4


def test_optimizer_flops_per_parameter() -> None:
    assert flops.optimizer_flops("sgd", 1000) == 4000
    assert flops.optimizer_flops("adam", 1000) == 13000
    assert flops.optimizer_flops("adamw", 1000) == 14000
    assert flops.optimizer_flops("lion", 1000) is None
