"""The step counter (issue 28): FLOPs as torch's FlopCounterMode counts them and bytes in one
dispatch mode that keeps no tensor, composed with activation checkpointing and our CPU attention
formulas; the fused attention kernels of every device counted alike."""

from __future__ import annotations

import contextlib
import gc

import pytest
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from gpubench import models
from gpubench.harness.checkpointing import checkpoint_blocks
from gpubench.harness.train import Trainer, make_trainer
from gpubench.probes import flops
from gpubench.probes.step_count import CountStep

CPU = torch.device("cpu")


Trained = tuple[Trainer, torch.Tensor, torch.Tensor]


def _trainer(model: str, checkpoint: bool, accumulate: int) -> Trained:
    """A tiny reference model's trainer after one step (its optimizer state exists), and a
    batch of 8."""
    torch.manual_seed(0)
    workload = models.build(model, "tiny")
    if checkpoint:
        checkpoint_blocks(workload.model)
    trainer = make_trainer(workload, CPU, "fp32", "adamw", accumulate=accumulate)
    x, y = workload.batch(8, CPU, seed=1)
    trainer.step(x, y)
    return trainer, x, y


CASES = [
    ("mlp", False, 1),
    ("cnn", False, 1),
    ("cnn", True, 4),
    ("transformer", False, 1),
    ("transformer", True, 4),
]


@pytest.mark.parametrize(("model", "checkpoint", "accumulate"), CASES)
def test_the_flops_are_flop_counter_modes_and_the_recomputation_is_apart(
    model: str, checkpoint: bool, accumulate: int
) -> None:
    trainer, x, y = _trainer(model, checkpoint, accumulate)
    reference = FlopCounterMode(display=False, custom_mapping=dict(flops.MISSED))
    with reference:
        trainer.step(x, y)
    with CountStep() as counted:
        trainer.step(x, y)
    assert counted.result is not None
    got = counted.result.flops
    assert got.total == reference.get_total_flops() > 0
    by_operator = reference.get_flop_counts()["Global"]
    assert got.by_operator == {str(op): n for op, n in by_operator.items()}
    assert (got.recomputed > 0) == checkpoint
    # our CPU attention formulas are in (the bare registry counts no CPU attention)
    assert (got.added > 0) == (model == "transformer")
    assert counted.result.bytes.total > 0


class _Made(TorchDispatchMode):
    """Weak references to the storage of every tensor an operator returns."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[StorageWeakRef, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                self.made.append((StorageWeakRef(storage), storage.nbytes()))
        return out


def _held_at_the_end(probe: contextlib.AbstractContextManager[object]) -> int:
    """Bytes of the storages a checkpointed Transformer step at 4 micro-batches made that are
    still alive when the step has returned but `probe` is still open."""
    trainer, x, y = _trainer("transformer", True, 4)
    with _Made() as seen, probe:
        trainer.step(x, y)
        gc.collect()
        alive = {ref.cdata: n for ref, n in seen.made if not ref.expired()}
    return sum(alive.values())


def test_the_counter_holds_no_tensor_the_step_let_go() -> None:
    bare = _held_at_the_end(contextlib.nullcontext())
    assert bare > 0  # the step's gradients and its loss
    assert _held_at_the_end(CountStep()) == bare
    # what the check catches: FlopCounterMode's module tracker keeps the recomputed blocks'
    # activations until it exits (torch 2.11-2.13), the reason CountStep exists
    assert _held_at_the_end(FlopCounterMode(display=False)) > bare


def _attention_shapes() -> tuple[torch.Tensor, ...]:
    b, h, t, d = 2, 4, 16, 8
    q, k, v, grad = (torch.empty(b, h, t, d, device="meta") for _ in range(4))
    return grad, q, k, v


def test_every_devices_fused_attention_is_counted_as_the_cpus() -> None:
    aten = torch.ops.aten
    grad, q, k, v = _attention_shapes()
    cpu_forward = flops.FORMULAS[aten._scaled_dot_product_flash_attention_for_cpu]
    cpu_backward = flops.FORMULAS[aten._scaled_dot_product_flash_attention_for_cpu_backward]
    scores = 2 * 2 * 4 * 16 * 16 * 8  # Q K^T: 2 * b * h * t * t * d
    assert cpu_forward(q, k, v, out_val=None) == 2 * scores
    assert cpu_backward(grad, q, k, v, out_val=None) == 5 * scores
    for kernel in ("flash", "efficient", "cudnn"):
        forward = getattr(aten, f"_scaled_dot_product_{kernel}_attention")
        backward = getattr(aten, f"_scaled_dot_product_{kernel}_attention_backward")
        # torch's registry counts the CUDA kernels; ours fills in the CPU's, with its formulas
        assert flops.FORMULAS[forward](q, k, v, out_val=None) == 2 * scores
        assert flops.FORMULAS[backward](grad, q, k, v, out_val=None) == 5 * scores
        # of those five backward matmuls, one recomputes the scores: not the model's work
        assert flops.RECOMPUTED_IN_BACKWARD[backward](grad, q, k, v, out_val=None) == scores
    assert len(flops.RECOMPUTED_IN_BACKWARD) == 4


def test_a_parallel_rows_mfu_divides_the_ranks_model_flops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpubench.config.spec import Point
    from gpubench.harness import parallel_probes

    monkeypatch.setattr(parallel_probes, "_datasheet_peak", lambda device, precision: 989.4)
    point = Point("transformer", "small", "cpu", "bf16", "adamw", 64, parallel="ddp", nproc=2)
    # each rank ran 5e12 FLOPs, of which 1e12 recomputed (checkpointing, attention's scores)
    ranks = [dict(flops_per_step=5e12, model_flops_per_step=4e12, bytes_per_step=1e9)] * 2
    values = parallel_probes._compute_values(point, ranks, 2, 0.1, None, torch.device("cpu"))
    assert values["tflops"] == pytest.approx(100.0)  # all the work: 1e13 FLOPs in 0.1 s
    assert values["mfu"] == pytest.approx(80.0 / (2 * 989.4))  # the model's: 8e12 in 0.1 s
