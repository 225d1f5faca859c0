"""The report's opening section: the verdict per model (science.verdict), as a person would
say it, with the numbers behind each claim."""

from __future__ import annotations

from collections.abc import Sequence

from gpubench.report import answer
from gpubench.report import html as H
from gpubench.science import bottleneck as B
from gpubench.science.verdict import ModelVerdict
from gpubench.store.wording import percent


def verdict_section(verdicts: Sequence[ModelVerdict], cpu_energy: str | None = None) -> str:
    """An HTML section: per model and optimizer, the fastest configuration (or the tie), how
    sure, what it stands on, the fastest on each device and how much faster one device is
    than another (where the rows span several), and why; then how it was judged. `cpu_energy`:
    why the CPU rows have no energy figure, said once (None: nothing to say)."""
    head = "<h2>Verdict</h2>\n"
    if not verdicts:
        return head + H.note("No point ran: there is nothing to conclude.")
    head += answer_table(verdicts) + (H.note(cpu_energy) if cpu_energy else "")
    cards = [_card(v) for v in verdicts]
    rules = (
        '<p class="caption">How the bottleneck is judged (first rule that holds): input-bound '
        f"when batches come from the host and copies take {percent(B.INPUT_COPY_SHARE)} or more of "
        f"the device's busy time; launch/host-bound when the device is busy less than "
        f"{percent(B.LAUNCH_BUSY)} of the unprofiled median step, when the step time hardly grows "
        f"with the batch (a fixed per-step cost of {percent(B.FIXED_SHARE)} or more of the step) "
        "from a smallest batch that is overhead-bound, or when the step is under "
        f"{percent(B.OVERHEAD_ROOF)} of both roofs; compute- or memory-bound at "
        f"{percent(B.BOUND_ROOF)} or "
        "more of that roof (the measured matmul peak, the measured bandwidth) and clearly above "
        "the other (by more than two calibrations of one machine differ); else mixed: both "
        "roofs alike, or under a third of both.</p>\n"
    )
    return head + '<div class="verdicts">' + "".join(cards) + "</div>\n" + rules


def answer_table(verdicts: Sequence[ModelVerdict]) -> str:
    """The answer at a glance (report.answer): the terminal's cells, as an HTML table."""
    numbers = [i for i, h in enumerate(answer.HEADERS) if h in answer.NUMBERS]
    rows = [
        [(c, c) if i in numbers and c else c for i, c in enumerate(r)]
        for r in answer.rows(verdicts)
    ]
    caption = (
        '<p class="caption">The answer at a glance: per model and optimizer the configuration '
        "to choose (in a tie the smaller batch, then the more samples per joule), its "
        "throughput as every view quotes it, the batch soonest to a quality target (measured "
        "where convergence runs reached it, else predicted from the gradient noise scale and "
        "the measured samples/s) with its gain over the throughput-fastest batch, its lead "
        "over the runner-up with the 95% interval between processes, the bottleneck, and "
        "energy and cost where measured. The details follow.</p>\n"
    )
    return caption + H.table(answer.HEADERS, rows) + "\n"


def _card(v: ModelVerdict) -> str:
    """One model's verdict: the terminal's lines (ModelVerdict.items), as HTML."""
    body = "".join(f"<li><b>{H.e(k)}</b>: {H.e(t)}</li>" for k, t in v.items())
    return (
        f'<div class="verdict"><h3>{H.e(v.model)}</h3>'
        f"<p><b>{H.e(v.headline())}</b></p>"
        f"<ul>{body}</ul></div>"
    )
