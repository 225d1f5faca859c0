"""The loader data mode's verdict (issue 31): whether a step is input-bound, from the wait its
row measured, and which of the loader's axes helps, from the rows that vary them.

A step is **input-bound** where the training loop waited at least INPUT_WAIT_SHARE of its time
for its batches (the sum of the measured steps' waits over the sum of their times). The evidence
names the share, the median wait and step, and the pipeline's own rate (samples/s it delivers
with the model removed) against the model's rate without the wait: a pipeline slower than the
model cannot keep it busy, however the two overlap."""

from __future__ import annotations

from typing import Any

from gpubench.config.keys import identity, same_key
from gpubench.science.partition import finite, norm
from gpubench.store.wording import milliseconds, number, percent, times

# A step that waits a fifth of its time for its batch would be 1.25x faster fed at once: more
# than any run-to-run noise, and the first thing a practitioner tunes.
INPUT_WAIT_SHARE = 0.2
# The loader's axes, besides which two rows are the same configuration.
LOADER_FIELDS = ("loader_workers", "prefetch", "persistent_workers")


def is_loader(row: dict[str, Any]) -> bool:
    return norm(row.get("data")) == "loader" and finite(row.get("input_wait_share"))


def wait_text(row: dict[str, Any]) -> str:
    """'waits 63% of the step for its batch (median 12 ms of 19 ms); the pipeline alone
    delivers 850 samples/s, x0.531 the model's 1,600 samples/s without the wait'."""
    share, wait, step = (float(row[k]) for k in ("input_wait_share", "input_wait_s", "step_time_s"))
    median = f"median {milliseconds(wait)} of {milliseconds(step)}"
    text = f"waits {percent(share)} of the step for its batch ({median})"
    if finite(row.get("pipeline_samples_per_s")) and finite(row.get("model_samples_per_s")):
        pipe, model = float(row["pipeline_samples_per_s"]), float(row["model_samples_per_s"])
        text += (
            f"; the pipeline alone delivers {number(pipe)} samples/s, {times(pipe / model)} the "
            f"model's {number(model)} samples/s without the wait"
        )
    return text


def input_evidence(row: dict[str, Any]) -> str | None:
    """The evidence that a loader row is input-bound, None where it is not (or is no loader's)."""
    if not is_loader(row) or float(row["input_wait_share"]) < INPUT_WAIT_SHARE:
        return None
    return wait_text(row) + f" (input-bound at {percent(INPUT_WAIT_SHARE)} or more)"


def _by_workers(best: dict[str, Any], rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The fastest row at each worker count among `rows` that differ from `best` only in the
    loader's axes."""
    key = same_key(best, *LOADER_FIELDS)
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        if same_key(r, *LOADER_FIELDS) != key or not finite(r.get("samples_per_s")):
            continue
        n = int(norm(r.get("loader_workers")) or 0)
        if n not in out or float(r["samples_per_s"]) > float(out[n]["samples_per_s"]):
            out[n] = r
    return out


def workers_lever(
    best: dict[str, Any],
    rows: list[dict[str, Any]],
    margin: float,
    tied: frozenset[tuple[Any, ...]] = frozenset(),
) -> tuple[list[str], str | None]:
    """The worker lever at `best`: '4 workers: x2.80 the samples/s of 0 workers' for each worker
    count measured against the fewest (within noise where one of the two is a row in `tied`,
    the rows the verdict could not tell from `best`), and the next experiment where the most
    workers measured is the fastest and still input-bound (more workers); ([], None) for other
    data."""
    if norm(best.get("data")) != "loader":
        return [], None
    found = _by_workers(best, rows)
    if len(found) < 2:
        n = int(norm(best.get("loader_workers")) or 0)
        more = max(2, 2 * n)
        return [f"more loader workers: not measured ({n} only)"], (
            f"measure more loader workers: --loader-workers {n},{more}"
        )
    base_n = min(found)
    base = float(found[base_n]["samples_per_s"])
    lines = []
    for n in sorted(found):
        if n == base_n:
            continue
        ratio = float(found[n]["samples_per_s"]) / base
        pipe = _ratio(found[n], found[base_n], "pipeline_samples_per_s")
        text = f"{n} workers: {times(ratio)} the samples/s of {base_n} workers"
        text += f" (the pipeline alone {times(pipe)})" if pipe is not None else ""
        if {identity(found[n]), identity(found[base_n])} & tied:
            text += ": within noise, the rows cannot tell the two apart"
        elif ratio * (1 + margin) < 1:
            text += ": slower here"
        elif ratio <= 1 + margin:
            text += f": no help beyond the {percent(margin)} margin"
        lines.append(text)
    most = max(found)
    todo = None
    if norm(best.get("loader_workers")) == most and input_evidence(best) is not None:
        todo = f"measure more loader workers: --loader-workers {most},{2 * most or 2}"
    return lines, todo


def _ratio(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    if not (finite(a.get(key)) and finite(b.get(key))) or float(b[key]) <= 0:
        return None
    return float(a[key]) / float(b[key])


def input_lines(
    best: dict[str, Any],
    rows: list[dict[str, Any]],
    margin: float,
    tied: frozenset[tuple[Any, ...]] = frozenset(),
) -> list[str]:
    """The verdict's input lines for a loader row: its wait (input-bound or not) and the worker
    lever (see workers_lever for `tied`); [] for other data."""
    if not is_loader(best):
        return []
    bound = input_evidence(best) is not None
    head = f"the fastest {wait_text(best)}: " + (
        "input-bound" if bound else f"not input-bound (under {percent(INPUT_WAIT_SHARE)})"
    )
    lines, _ = workers_lever(best, rows, margin, tied)
    return [head, *lines]
