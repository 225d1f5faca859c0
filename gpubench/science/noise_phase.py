"""A sweep's noise phase (issue 51): a short training of a reference model on its real data set
(digits for the MLP and the CNN, the text corpus for the transformer: data.catalog) whose own
steps give the gradient noise scale B_noise (science.gradient_norms, through the convergence
path), so that a speed sweep, whose points run on synthetic batches, can predict the batch
fastest to a quality target.

B_noise grows as training goes on (McCandlish et al. 2018), so a value taken at initialisation
favours small batches: the phase measures every other step after a warm-up window of
`warmup_steps` optimizer updates (the learning rate's own warm-up included), and the entry
says which steps it was taken over. Its cost is the phase's whole time per model (data,
model, training), recorded beside the figure.
"""

from __future__ import annotations

import time

from gpubench.config.convergence import Convergence
from gpubench.config.spec import Point
from gpubench.store.noise_record import NoiseEntry

# the phase's defaults: a few seconds a model on a 2-core CPU
BUDGET_S = 3.0
BATCH = 32
WARMUP_STEPS = 20
EVERY = 2


def measure(
    model: str,
    size: str,
    optimizer: str,
    device: str = "cpu",
    budget_s: float = BUDGET_S,
    batch_size: int = BATCH,
    warmup_steps: int = WARMUP_STEPS,
    seed: int = 0,
    max_steps: int | None = None,
) -> NoiseEntry | None:
    """Train `model` at preset `size` on its real data set for `budget_s` seconds of training
    or `max_steps` optimizer updates, whichever ends first (fp32, `optimizer` at its default
    learning rate scaled from batch 32 by the suite's rule), measuring every EVERY-th step
    from `warmup_steps` on, and return its B_noise (preconditioned under Adam and AdamW, else
    raw) with where it was taken and what it cost; None where no step after the warm-up window
    was measured (the budget too short). ValueError where the run did not train (its row's
    reason) or `budget_s` is not above 0."""
    if not budget_s > 0:
        raise ValueError(f"noise phase budget_s {budget_s!r}; allowed: a number above 0")
    from gpubench.science import convergence  # torch: imported where the phase runs

    started = time.perf_counter()
    conv = Convergence(
        max_time_s=budget_s,
        max_steps=max_steps,
        eval_every_steps=10**9,  # one evaluation at step 0: the phase needs no curve
        eval_samples=64,
        noise_every_steps=EVERY,
        noise_from_step=warmup_steps,
    )
    rule = "sqrt" if optimizer in ("adam", "adamw") else "linear"
    point = Point(model, size, device, "fp32", optimizer, batch_size, seed, lr_scaling=rule)
    row = convergence.train_point(point, conv)
    if row["status"] not in ("ok", "diverged"):
        raise ValueError(f"the noise phase of {model}/{size} did not train: {row.get('error')}")
    for kind, column in (
        ("preconditioned", "noise_scale_b_noise_preconditioned"),
        ("raw", "noise_scale_b_noise"),
    ):
        value = row.get(column)
        if isinstance(value, float) and value > 0:
            return NoiseEntry(
                model=model,
                model_size=size,
                optimizer=optimizer,
                device=device,
                dataset=str(row["dataset"]),
                batch_size=batch_size,
                b_noise=value,
                low=row.get(f"{column}_low"),
                high=row.get(f"{column}_high"),
                kind=kind,
                first_step=int(row["noise_scale_first_step"]),
                last_step=int(row["noise_scale_last_step"]),
                steps=int(row["noise_scale_steps"]),
                train_s=float(row["wall_time_s"]),
                cost_s=time.perf_counter() - started,
            )
    return None
