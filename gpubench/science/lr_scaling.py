"""Learning-rate scaling across batch sizes, with Goyal et al.'s gradual warm-up.

`linear` (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): lr = base_lr * B / B0.
`sqrt` (the rule usually used for Adam-type optimizers): lr = base_lr * sqrt(B / B0).
`none`: lr = base_lr at every batch size.
Where the scaled rate is above the base rate it is reached by a linear ramp from the base rate
over a number of training samples (Goyal et al. ramp over 5 epochs), so the ramp is shorter in
steps at larger batches.
"""

from __future__ import annotations

import math

RULES = ("none", "linear", "sqrt")


def scaled_lr(base_lr: float, rule: str, batch_size: int, base_batch_size: int) -> float:
    """The peak learning rate for `batch_size` under `rule`, relative to `base_batch_size`."""
    ratio = batch_size / base_batch_size
    if rule == "none":
        return base_lr
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    raise ValueError(f"unknown learning-rate scaling {rule!r}; allowed: {', '.join(RULES)}")


def warmup_steps(base_lr: float, peak_lr: float, warmup_samples: int, batch_size: int) -> int:
    """Steps of the ramp from `base_lr` to `peak_lr`: ceil(warmup_samples / batch_size) where
    the peak is above the base rate, else 0."""
    if peak_lr <= base_lr or warmup_samples <= 0:
        return 0
    return math.ceil(warmup_samples / batch_size)


def lr_at(step: int, base_lr: float, peak_lr: float, warmup: int) -> float:
    """The learning rate of 0-based training step `step`: base_lr at step 0, rising linearly to
    peak_lr at step `warmup`, and peak_lr from then on."""
    if step >= warmup:
        return peak_lr
    return base_lr + (peak_lr - base_lr) * step / warmup
