"""A sweep's noise phase (issue 51): one run of each reference model toward its quality target on
its real data set (digits for the MLP and the CNN, the text corpus for the transformer:
data.catalog), whose own steps give the gradient noise scale B_noise (science.gradient_norms),
so that a speed sweep, whose points run on synthetic batches, can predict the batch fastest to
that target.

B_noise grows as training goes on (McCandlish et al. 2018), so a window early in training
predicts a shallow target and favours small batches. The run trains under the settings that
`--confirm-target` checks the prediction under (config.suite.target_settings: the convergence
suite's target, learning-rate rule and warm-up, the model at its own input size, as its speed
points ran it), at BATCH (SMALL_BATCH where a probe says BATCH's updates do not fit its
share), measuring its first updates and then one in four (science.noise_training), and stops
at the target or its time. The figure is the critical batch of the path it trained
(science.noise_path): each stretch's B_noise weighed by the fewest steps the stretch needs. A
run that stops short of the target has seen only the start of the path, where B_noise is
lower: its interval is unbounded above, and the verdict claims no gain from it.
Preconditioned under Adam and AdamW where its interval is bounded, else raw (`chosen`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpubench.config.convergence import Convergence
from gpubench.science.noise_path import (
    MIN_STRETCHES,
    STRETCH_MEASURED,
    PathNoise,
    path_noise,
)
from gpubench.store.noise_record import NoiseEntry
from gpubench.store.wording import plural, seconds

# the seconds of one `measure` called alone (a sweep shares its noise_budget_s instead)
BUDGET_S = 3.0
# B_noise does not depend on the threads, and a small batch gains little from more, while on a
# shared CPU the intra-op threads wait on each other: on a 2-core CPU at load 10 a cnn/small
# step took 62 ms with one thread and 341 ms with two
CPU_THREADS = 1
# a batch that reaches the convergence suite's targets in a few hundred updates on the CPU
# (cnn/tiny: 919-1262 at B=64, results/20261202-cpu-target-grid), in 4 micro-batches
BATCH = 64
# the batch where BATCH's updates would not give FEWEST_STEPS within the share (one update at
# BATCH, timed on a model built for it, says so): a figure from the start of the path rather
# than none (cnn/small's update at B=64 took 0.1 s on one thread)
SMALL_BATCH = 16
FEWEST_STEPS = MIN_STRETCHES * STRETCH_MEASURED  # the first updates are all measured
# room beside the probe's one update: the run's own first update and evaluations, a machine
# that slows (cnn/small's 21 updates of B=64 did not fill 3 stretches in a 2.26 s share that
# its probe said held 24)
PROBE_MARGIN = 1.5
RESERVE = 0.05  # of the phase's budget, left to the worker's call and the record (not shared)


@dataclass(frozen=True)
class NotMeasured:
    """A model and optimizer the phase gave no B_noise, and why, in one line."""

    model: str
    model_size: str
    optimizer: str
    reason: str

    def line(self) -> str:
        """e.g. 'noise phase: cnn/small adamw not measured (...)'."""
        what = f"{self.model}/{self.model_size} {self.optimizer}"
        return f"noise phase: {what} not measured ({self.reason})"


def chosen(
    figures: Sequence[tuple[str, PathNoise]],
) -> tuple[str, PathNoise] | None:
    """The figure the phase states, of (kind, B_path) in order of preference (the
    preconditioned one first, where the optimizer has one): the first with a positive finite
    B_noise whose interval is bounded above, else the first with a positive finite B_noise;
    None where none has one. Early in a transformer's training under AdamW the preconditioned
    figure read 1e6-1e7 with no upper bound (embedding rows whose Adam second moment is still
    about 0, divided by eps): a bounded raw figure says more than that."""
    positive = [(k, f) for k, f in figures if 0 < f.b_noise < float("inf")]
    bounded = [(k, f) for k, f in positive if f.high is not None and f.high < float("inf")]
    ranked = bounded or positive
    return ranked[0] if ranked else None


def measure(
    model: str,
    size: str,
    optimizer: str,
    device: str = "cpu",
    budget_s: float = BUDGET_S,
    batch_size: int = BATCH,
    seed: int = 0,
    conv: Convergence | None = None,
) -> NoiseEntry | NotMeasured:
    """Train `model` at preset `size` toward its target on its real data set (fp32,
    `optimizer`, under `conv`: None for config.suite.target_settings) at `batch_size` until the
    target or `budget_s` seconds in all (data, model and training), and return the B_noise of
    the path it trained (science.noise_path), with where it was taken and what it cost.
    NotMeasured where fewer than MIN_STRETCHES stretches of measured steps fit, or no figure is
    positive and finite. ValueError for a bad argument."""
    if not budget_s > 0:
        raise ValueError(f"noise phase budget_s {budget_s!r}; allowed: a number above 0")
    from gpubench.science import noise_training  # torch: where the phase runs

    if batch_size < 1 or batch_size % noise_training.SPLITS:
        raise ValueError(
            f"noise phase batch_size {batch_size}; allowed: a batch that splits into "
            f"{noise_training.SPLITS} equal micro-batches"
        )
    started = time.perf_counter()
    deadline = started + budget_s
    if conv is None:
        from gpubench.config.suite import target_settings

        conv = target_settings(optimizer)
    ds, _ = noise_training.load(model, size, conv)
    batch = min(batch_size, ds.train_size - ds.train_size % noise_training.SPLITS)
    if batch > SMALL_BATCH:
        probe = noise_training.step_s(model, size, optimizer, device, batch, conv)
        if time.perf_counter() + PROBE_MARGIN * FEWEST_STEPS * probe > deadline:
            batch = SMALL_BATCH
    path = noise_training.train(model, size, optimizer, device, batch, seed, conv, deadline)
    figures: list[tuple[str, PathNoise]] = []
    for kind, stretches in (("preconditioned", path.preconditioned), ("raw", path.raw)):
        if len(stretches) >= MIN_STRETCHES:
            figures.append((kind, path_noise(stretches, batch)))
    pick = chosen(figures)
    if pick is None:
        most = max(len(path.preconditioned), len(path.raw))
        why = (
            f"{most} of the {MIN_STRETCHES} stretches of {STRETCH_MEASURED} "
            f"measured steps needed fit in its {seconds(budget_s)} budget "
            f"({plural(path.steps, 'update')} of B={batch})"
            if most < MIN_STRETCHES
            else f"no finite B_noise over {plural(path.steps, 'update')}"
        )
        return NotMeasured(model, size, optimizer, why)
    kind, figure = pick[0], _short(pick[1], path.reached)
    return NoiseEntry(
        model=model,
        model_size=size,
        optimizer=optimizer,
        device=device,
        dataset=path.dataset,
        batch_size=batch,
        b_noise=figure.b_noise,
        low=figure.low,
        high=None if figure.high is None or figure.high == float("inf") else figure.high,
        kind=kind,
        first_step=0,
        last_step=path.steps,
        steps=path.measured,
        train_s=path.train_s,
        cost_s=time.perf_counter() - started,
        target_metric=path.metric,
        target=path.target,
        metric_last=path.last,
        reached=path.reached,
    )


def _short(figure: PathNoise, reached: bool) -> PathNoise:
    """`figure` as stated: a path short of its target is unbounded above (the rest of it, where
    B_noise is higher, was not trained)."""
    if reached or figure.low is None:
        return figure
    return PathNoise(figure.b_noise, figure.low, float("inf"), figure.stretches, figure.steps)


def measure_all(
    pairs: Sequence[tuple[str, str, str]], device: str, budget_s: float
) -> list[NoiseEntry | NotMeasured]:
    """Each (model, size, optimizer) of `pairs` measured in turn within `budget_s` seconds in
    all: each gets an even share of what the ones before it left (a fast one leaves time to the
    next), its data set loaded first (once a process, out of the whole budget). On the CPU it
    trains with CPU_THREADS intra-op threads. Run in a sweep's worker (run.noise_sweep)."""
    if not budget_s > 0:
        raise ValueError(f"noise phase budget_s {budget_s!r}; allowed: a number above 0")
    from gpubench.harness.threads import intra_op_threads  # torch: where the phase runs

    threads = CPU_THREADS if device == "cpu" else None
    with intra_op_threads(threads):
        return _measure_all(pairs, device, budget_s)


def _measure_all(
    pairs: Sequence[tuple[str, str, str]], device: str, budget_s: float
) -> list[NoiseEntry | NotMeasured]:
    from gpubench.config.suite import target_settings
    from gpubench.science import noise_training

    end = time.perf_counter() + budget_s * (1 - RESERVE)
    out: list[NoiseEntry | NotMeasured] = []
    for n, (model, size, optimizer) in enumerate(pairs):
        noise_training.load(model, size, target_settings(optimizer))
        share = (end - time.perf_counter()) / (len(pairs) - n)
        if share <= 0:
            out.append(NotMeasured(model, size, optimizer, "the phase's budget was spent"))
            continue
        out.append(measure(model, size, optimizer, device, budget_s=share))
    return out
