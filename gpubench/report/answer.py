"""The answer at a glance: one table, a row per model and optimizer (and per device where a
verdict's rows span several), drawn from the verdicts alone so that the terminal (`explain`, the
end of a sweep) and the report show the same cells."""

from __future__ import annotations

from collections.abc import Sequence

from gpubench.science import standing
from gpubench.science.verdict import ModelVerdict
from gpubench.store.wording import cell, number

HEADERS = (
    "model, optimizer",
    "configuration",
    "samples/s",
    "tokens/s",
    "fastest to target",
    "lead over the runner-up",
    "bottleneck",
    "samples/J",
    "$ per M samples",
)
# the columns of numbers (right-aligned where a table can)
NUMBERS = ("samples/s", "tokens/s", "samples/J", "$ per M samples")


def rows(verdicts: Sequence[ModelVerdict]) -> list[tuple[str, ...]]:
    """The answer table's rows (cells as text, in HEADERS' order): per verdict its choice (in a
    tie the first of standing.tie_order: the smaller batch, then the more samples per joule),
    that choice's throughput as every view quotes it ('(re-measured)' where it is the verdict's
    re-measurement; tokens/s for sequence models), its lead over the runner-up with the 95%
    interval, or 'tie' with the closest gap, the batch soonest to a quality target, measured or
    predicted, with its gain over the throughput-fastest batch (science.fastest_to_target: the
    cell `explain --json` quotes), the bottleneck in a word, and its samples per
    joule and dollars per million samples where measured ('' elsewhere). Where a verdict's rows
    span several devices, a row per device follows with that device's fastest."""
    out: list[tuple[str, ...]] = []
    for v in verdicts:
        choice = _choice(v)
        sps = v.samples_per_s if choice is None else float(str(choice["samples_per_s"]))
        again = v.remeasured if choice is None else choice.get("source") == "rounds"
        mark = " (re-measured)" if again else ""
        # one model, one sequence length: tokens in proportion to samples
        tokens = None if v.tokens_per_s is None else v.tokens_per_s * sps / v.samples_per_s
        per_j = v.samples_per_j if choice is None else choice.get("samples_per_j")
        usd = v.usd_per_million_samples if choice is None else None
        out.append(
            (
                v.model,
                v.fastest if choice is None else str(choice["label"]),
                f"{number(sps)}{mark}",
                cell(tokens, ",.0f"),
                "" if v.goodput is None else v.goodput.cell(),
                _lead(v),
                v.bottleneck or "not classified",
                cell(per_j, ",.3g"),
                cell(usd, ",.3g"),
            )
        )
        if len(v.devices) > 1:
            out += [
                (f"  on {d.device}", d.fastest, number(d.samples_per_s), *[""] * 6)
                for d in v.devices
            ]
    return out


def _choice(v: ModelVerdict) -> dict[str, object] | None:
    """In a tie, the configuration tie_order() puts first where it is not the leader (None:
    the leader itself)."""
    if not v.ties:
        return None
    leader = {
        "label": v.fastest,
        "samples_per_s": v.samples_per_s,
        "identity": v.identity,
        "samples_per_j": v.samples_per_j,
    }
    first = standing.tie_order([leader, *standing.closest(v.ties)])[0]
    return None if first is leader else first


def _lead(v: ModelVerdict) -> str:
    """'x1.36 (95% CI 1.29-1.44) over B', or 'tie: A x1.04 (95% CI 0.99-1.08) over B' (A the
    leader by its figure), or '' (nothing to compare with)."""
    d = v.lead_over
    if d is None:
        return ""
    gap = standing.gap(d)
    if d.get("tie"):  # the gap is the leader's over the closest, whichever is chosen
        return f"tie: {v.fastest} {gap} over {d['label']}"
    return f"{gap} over {d['label']}"
