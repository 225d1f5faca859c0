"""The report's chart of the fastest to a quality target (issue 51): per model with a
prediction, the samples/s per batch above the predicted time to target per batch, both from the
verdict's own figures (science.fastest_to_target), so the chart, the answer table and
`explain --json` quote the same numbers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpubench.report.figure import Chart, batch_axis, panels, save
from gpubench.science.verdict import ModelVerdict

FILE = "time_to_target_predicted.png"
PICK = "predicted fastest to target"
TOP = "throughput-fastest batch"
KEYS = {
    PICK: {"marker": "*", "markersize": 12, "mec": "black", "linestyle": "none"},
    TOP: {"marker": "^", "markersize": 8, "mec": "black", "linestyle": "none"},
}


def predicted_time(verdicts: Sequence[ModelVerdict], plots_dir: Path) -> Chart | None:
    """Per verdict with a prediction, a column of two panels against batch: its samples/s (the
    figures the pick was made from) and its predicted time to target over the pick's
    ((B + B_noise)/X(B), the pick 1), with the measured median time to target over the
    measured best beside it where convergence rows reached the target, and the runs of
    --confirm-target over the pick's (science.target_check). None where no verdict has a
    prediction."""
    shown = [v for v in verdicts if v.goodput is not None and v.goodput.pick is not None]
    if not shown:
        return None
    fig, axes = panels([v.model for v in shown], rows_per_title=2)
    for v, (top, bottom) in zip(shown, axes, strict=True):
        got = v.goodput
        assert got is not None and got.pick is not None and got.samples_per_s is not None
        p, rates, rel = got.pick, got.samples_per_s, got.relative_times()
        top.plot(list(rates), list(rates.values()), "o-", color="tab:blue", label="samples/s")
        top.plot(
            p.throughput_batch,
            rates[p.throughput_batch],
            "^",
            color="tab:blue",
            markersize=9,
            mec="black",
            label=TOP,
        )
        batch_axis(top, rates, "samples/s (log scale)")
        bottom.plot(
            list(rel),
            list(rel.values()),
            "o-",
            color="tab:orange",
            label="predicted time to target (over the pick's)",
        )
        bottom.plot(p.batch, 1.0, "*", color="tab:orange", markersize=14, mec="black", label=PICK)
        m = got.measured
        if m is not None:
            best = m.times_s[m.batch]
            bottom.plot(
                list(m.times_s),
                [t / best for t in m.times_s.values()],
                "s--",
                color="tab:green",
                label="measured time to target (median over seeds, over the best's)",
            )
        trained = got.check.relative_times() if got.check is not None else {}
        if trained:  # issue 51: sweep --confirm-target's runs
            bottom.plot(
                list(trained),
                list(trained.values()),
                "D:",
                color="tab:red",
                label="trained to the target (median over seeds, over the pick's)",
            )
        batch_axis(
            bottom,
            [*rel, *(m.times_s if m else ()), *trained],
            "time to target over the pick's (log scale)",
        )
    save(fig, plots_dir, FILE, "Fastest to a quality target: predicted from B_noise", keys=KEYS)
    return Chart(
        FILE,
        "Fastest to target (predicted)",
        "Per model, above: the samples per second measured at each batch (the triangle marks "
        "the throughput-fastest). Below: the time to reach a quality target that the gradient "
        "noise scale predicts, (B + B_noise) / samples/s, relative to the pick (the star, 1); "
        "where convergence runs reached the target, their median time over seeds relative to "
        "the measured best is drawn beside it, and where sweep --confirm-target trained the "
        "pick and its rivals, their median time over seeds relative to the pick's. A "
        "prediction until training runs confirm it; "
        "the verdict's 'fastest to target' line states B_noise, its interval and where in "
        "training it was taken.",
    )
