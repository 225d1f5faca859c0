"""A sweep's noise phase (issue 51): a short training of a reference model on its real data set
(digits for the MLP and the CNN, the text corpus for the transformer: data.catalog) whose own
steps give the gradient noise scale B_noise (science.gradient_norms), so that a speed sweep,
whose points run on synthetic batches, can predict the batch fastest to a quality target.

The light path: the data set loaded once per model (no hash), the model built once per
optimizer, training straight on the data set's train batches at a small batch (BATCH, split
into SPLITS micro-batches on the measured steps: the statistic compares micro-batch gradients
with their mean), with no evaluation. B_noise grows as training goes on (McCandlish et al.
2018), so a value taken at initialisation favours small batches: the warm-up, not measured,
runs WARMUP_STEPS updates (fewer, LEAST_WARMUP_STEPS at the least, only where the rest of the
budget would not then hold MEASURED_STEPS measured steps), counted in updates so that a faster
machine measures the same steps of training, not later ones; every update after it is
measured, up to `measured_steps` of them or the time budget, and at least MIN_STEPS (the
fewest that give an interval: science.gradient_noise's 3 batch means of 3 steps). A model
whose steps cannot give MIN_STEPS measured steps within its budget gets no figure: one line
says why (its step time), rather than a B_noise from too few steps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpubench.store.noise_record import NoiseEntry
from gpubench.store.wording import plural, seconds

# the phase's defaults: about a second a model and optimizer on a 2-core CPU
BUDGET_S = 2.0
# B_noise does not depend on the threads, and a batch of 16 gains little from more, while on a
# shared CPU the intra-op threads wait on each other: on a 2-core CPU at load 10 a cnn/small
# step took 62 ms with one thread and 341 ms with two
CPU_THREADS = 1
BATCH = 16
SPLITS = 4  # micro-batches of a measured step (config.convergence's noise_splits default)
# The warm-up's updates where the budget holds them. Along 200 steps of transformer/tiny AdamW
# at B=16 the raw B_noise grew 3.4 (steps 0-24) -> 15.5 (50-74) -> 64 (75-124, loss near the
# published run's target) -> 215 (125-149), against that run's B_crit 44.9 (docs/method.md):
# steps 100-129 lie in the window that brackets it. A warm-up counted in seconds (it was 60% of
# the budget) took a fast model to step 400 and more, near convergence, where |G|^2 is lost in
# the noise (no finite B_noise over 30 steps of mlp/tiny once in CI).
WARMUP_STEPS = 100
LEAST_WARMUP_STEPS = 20  # the fewest warm-up updates, where the budget is short
# a measured step (its micro-batches' norms) weighed at this many warm-up steps
MEASURED_COST = 3.0
MEASURED_STEPS = 30
JUDGE_STEPS = 3  # a step time is judged on the mean of the latest 3, from the 4th step on
MIN_STEPS = 9  # 3 batch means of 3 steps: the fewest that give Fieller's interval


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


def warmed_up(
    now: float, deadline: float, steps: int, warmup_steps: int, measured_steps: int, step_s: float
) -> bool:
    """Whether the warm-up ends after `steps` updates at time `now`: `warmup_steps` are done, or
    min(LEAST_WARMUP_STEPS, `warmup_steps`) are and the time to `deadline` would no longer hold
    `measured_steps` measured steps at MEASURED_COST times `step_s` (judged from the
    JUDGE_STEPS + 1th update)."""
    if steps >= warmup_steps:
        return True
    if steps < min(LEAST_WARMUP_STEPS, warmup_steps) or steps <= JUDGE_STEPS:
        return False
    return now + measured_steps * MEASURED_COST * step_s > deadline


def measure(
    model: str,
    size: str,
    optimizer: str,
    device: str = "cpu",
    budget_s: float = BUDGET_S,
    batch_size: int = BATCH,
    warmup_steps: int = WARMUP_STEPS,
    measured_steps: int = MEASURED_STEPS,
    seed: int = 0,
) -> NoiseEntry | NotMeasured:
    """Train `model` at preset `size` on its real data set (fp32, `optimizer` at its default
    learning rate scaled from batch 32 by the suite's rule: linear for SGD, sqrt for
    Adam and AdamW) for `warmup_steps` updates (fewer, LEAST_WARMUP_STEPS at the least, where
    the rest of `budget_s` would not then hold `measured_steps` measured steps at MEASURED_COST
    times the latest step time), then measure each update until `measured_steps` are measured
    or `budget_s` seconds (data, model and training together) are spent, and return its B_noise
    (preconditioned under Adam and AdamW, else raw) with where it was taken and what it cost.
    NotMeasured, with its step time, where fewer than MIN_STEPS updates could
    be measured within `budget_s` (the training stops as soon as its step time says so), or no
    measured step had a finite norm or a positive |G|^2. ValueError for a bad argument."""
    if not budget_s > 0:
        raise ValueError(f"noise phase budget_s {budget_s!r}; allowed: a number above 0")
    if measured_steps < MIN_STEPS:
        raise ValueError(f"measured_steps {measured_steps}; allowed: {MIN_STEPS} or more")
    if warmup_steps < 0 or batch_size % SPLITS:
        raise ValueError(
            f"warmup_steps {warmup_steps}, batch_size {batch_size}; allowed: warmup_steps >= 0 "
            f"and a batch size that splits into {SPLITS} equal micro-batches"
        )
    started = time.perf_counter()
    deadline = started + budget_s
    from gpubench.science.noise_training import NoiseTraining  # torch: where the phase runs

    run = NoiseTraining(model, size, optimizer, device, batch_size, SPLITS, seed)
    times: list[float] = []
    measuring = False
    least = min(LEAST_WARMUP_STEPS, warmup_steps)
    while run.measured < measured_steps:
        t0 = time.perf_counter()
        run.step(measure=measuring)
        now = time.perf_counter()
        times.append(now - t0)
        # the steps to come weighed at the latest JUDGE_STEPS' mean (measured steps cost more
        # than the warm-up's; the first steps' one-time costs are not judged on)
        step_s = sum(times[-JUDGE_STEPS:]) / len(times[-JUDGE_STEPS:])
        if not measuring:
            measuring = warmed_up(now, deadline, run.steps, warmup_steps, measured_steps, step_s)
        still = max(least - run.steps, 0) + max(MIN_STEPS - run.measured, 0)
        judged = run.steps > JUDGE_STEPS or now > deadline
        if run.measured < MIN_STEPS and judged and now + still * step_s > deadline:
            need = least + MIN_STEPS
            return NotMeasured(
                model,
                size,
                optimizer,
                f"a step of B={batch_size} on {run.dataset} takes {seconds(step_s)}: "
                f"{need} steps ({least} warm-up, {MIN_STEPS} measured) do not fit in "
                f"its {seconds(budget_s)} budget",
            )
        if now > deadline:
            break
    estimate = run.estimate()
    if estimate is None:
        return NotMeasured(
            model, size, optimizer, f"no finite B_noise over {plural(run.measured, 'step')}"
        )
    b_noise, low, high, kind, first, last, n = estimate
    return NoiseEntry(
        model=model,
        model_size=size,
        optimizer=optimizer,
        device=device,
        dataset=run.dataset,
        batch_size=batch_size,
        b_noise=b_noise,
        low=low,
        high=high,
        kind=kind,
        first_step=first,
        last_step=last,
        steps=n,
        train_s=run.train_s,
        cost_s=time.perf_counter() - started,
    )


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
    from gpubench.science import noise_training

    end = time.perf_counter() + budget_s
    out: list[NoiseEntry | NotMeasured] = []
    for n, (model, size, optimizer) in enumerate(pairs):
        noise_training.load(model, size)
        share = (end - time.perf_counter()) / (len(pairs) - n)
        if share <= 0:
            out.append(NotMeasured(model, size, optimizer, "the phase's budget was spent"))
            continue
        out.append(measure(model, size, optimizer, device, budget_s=share))
    return out
