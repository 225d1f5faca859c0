"""The verdict per model: the fastest configuration measured, on each device and across them
(science.devices), how much faster one device is than another, what holds its step back
(science.bottleneck) with the numbers behind it, the levers that address that bottleneck with
their measured effect where the sweep measured them, the next experiment worth running, and the
samples per joule of each device's fastest (or why it has none); and what the run planned and did
not measure (science.plan), so that a run that stopped early says so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpubench.config.keys import FIXED, Key, configuration, identity, identity_dict, partition_key
from gpubench.science import economy, leaders, plan, remeasured, standing, target_time
from gpubench.science.bottleneck import BOTTLENECKS, Bottleneck, classify
from gpubench.science.devices import Across, DeviceLead, across, device_leads, energy_lines
from gpubench.science.effective_batch import EffectiveBatch, effective_batches
from gpubench.science.fastest_to_target import (
    FastestToTarget,
    critical_of,
    measured_of,
    noise_of,
    noise_of_phase,
    samples_per_s_by_batch,
)
from gpubench.science.fastest_to_target import answer as goodput_answer
from gpubench.science.input_bound import input_lines
from gpubench.science.levers import levers, no_help
from gpubench.science.partition import (
    answer,
    device_of,
    finite,
    grouped,
    heading,
    label,
    series,
    varying,
)
from gpubench.science.partition import norm as _norm
from gpubench.store.growth_record import Stop
from gpubench.store.noise_record import NoiseEntry
from gpubench.store.wording import milliseconds, number, span, times


@dataclass
class ModelVerdict:
    """The verdict on one partition (model, size, its options, optimizer, lr rule: what the user
    chose). Every number comes from a measured row; `ties` are the configurations the fastest
    could not be told from, `confidence` says how that was decided, `stands_on` names the
    contended or noisy rows behind the answer (None when every row was clean)."""

    model: str  # the partition's heading: "mlp/small, adamw"
    fastest: str  # the fastest configuration (the leader of a tie), as a label
    samples_per_s: float
    device: str
    identity: dict[str, Any] = field(default_factory=dict)
    ties: list[dict[str, Any]] = field(default_factory=list)
    confidence: str = ""
    confirmation: dict[str, Any] | None = None
    stands_on: str | None = None
    stands_on_counts: dict[str, int] = field(default_factory=dict)
    cpu_speedup: str | None = None
    time_to_target: str | None = None
    # issue 51: the goodput pick from B_noise and the samples/s per batch (science.goodput)
    goodput: FastestToTarget | None = None
    bottleneck: str | None = None
    evidence: list[str] = field(default_factory=list)
    levers: list[str] = field(default_factory=list)
    # settings of the levers measured here that do not help: slower, or within the margin
    not_levers: list[str] = field(default_factory=list)
    next_experiment: str | None = None
    energy: list[str] = field(default_factory=list)
    unclassified: str | None = None  # why the bottleneck is not classified
    # issue 25: per effective batch measured several ways, the fastest way and each one's cost
    effective_batch: list[EffectiveBatch] = field(default_factory=list)
    # issue 28: the fastest on each device (the fastest device first), and the fastest device
    # against each other one
    devices: list[DeviceLead] = field(default_factory=list)
    across: list[Across] = field(default_factory=list)
    # the leader's samples/s in the interleaved rounds where they tied it (the tie's figures are
    # then the rounds'), and the practical difference under which a lead is a tie
    rounds_samples_per_s: float | None = None
    margin: float = leaders.MARGIN
    # issue 32: least energy and cost to target, the cheapest per sample (science.economy)
    economy: list[str] = field(default_factory=list)
    # issue 31: a loader's wait for its batches and the worker lever ([]: other data)
    input: list[str] = field(default_factory=list)
    # issue 41: whether `samples_per_s` is the verdict's re-measurement (science.remeasured),
    # the leader's measured samples per joule (tie order), and the rows of the partition whose
    # own interval missed their re-measurement, said as lines
    remeasured: bool = False
    samples_per_j: float | None = None
    unstable: list[str] = field(default_factory=list)
    # the leader's tokens/s (sequence models; in proportion to the quoted samples/s) and
    # dollars per million samples where a price was given; its lead over the runner-up (the
    # closest tie in a tie): label, ratio, its 95% interval low and high (None: none), source
    tokens_per_s: float | None = None
    usd_per_million_samples: float | None = None
    lead_over: dict[str, Any] | None = None
    # issues 41 and 42: the partition's points planned and not measured (science.plan), as one
    # line and per point (label, identity, reason, why)
    planned: str | None = None
    unmeasured: list[dict[str, Any]] = field(default_factory=list)

    def headline(self) -> str:
        """The first line (standing.headline): the fastest, or the tie, each figure the one
        every view quotes for its configuration."""
        leader = {
            "label": self.fastest,
            "samples_per_s": self.samples_per_s,
            "identity": self.identity,
            "samples_per_j": self.samples_per_j,
        }
        return standing.headline(leader, self.ties, self.margin, self.remeasured)

    def lines(self) -> list[str]:
        """The verdict as lines of text: the headline, then each item (the terminal's words)."""
        return [f"{self.model}: {self.headline()}", *(f"  {k}: {t}" for k, t in self.items())]

    def items(self) -> list[tuple[str, str]]:
        """The verdict below its headline as (heading, text) pairs, in order. The terminal's
        lines and the report's card are both drawn from these, so they cannot say different
        things."""
        out = [("how sure", self.confidence)]
        out += [("unstable", line) for line in self.unstable]
        if self.stands_on:
            out.append(("stands on", self.stands_on))
        if self.planned:
            out.append(("planned, not measured", self.planned))
        if self.time_to_target:
            out.append(("fastest to target", self.time_to_target))
        if self.goodput is not None:
            out.append(("fastest to target", self.goodput.line()))
        out += self.device_items()
        if self.bottleneck:
            out.append(
                ("bottleneck", f"{BOTTLENECKS[self.bottleneck]} ({'; '.join(self.evidence)})")
            )
        else:
            why = f"not classified ({self.unclassified or 'no evidence'})"
            out.append(("bottleneck", "; ".join([why, *self.evidence])))
        out += [("input", line) for line in self.input]  # issue 31
        out += [("lever", lever) for lever in self.levers]
        out += [("not a lever", line) for line in self.not_levers]
        if self.next_experiment:
            out.append(("next", self.next_experiment))
        out += [("energy", e) for e in self.energy]
        # issue 32: each economy line opens with its own heading ("cheapest: ...")
        out += [(k, t) for k, _, t in (e.partition(": ") for e in self.economy)]
        out += [("effective batch", a.line()) for a in self.effective_batch]  # issue 25
        return out

    def device_items(self) -> list[tuple[str, str]]:
        """Where the rows span several devices: ('on cuda', its fastest and how sure) per device,
        then ('across devices', how much faster the fastest device is) per other device. []
        with one device (the headline is its answer)."""
        if len(self.devices) < 2:
            return []
        items = [
            # the answer's own device: its how-sure is the headline's, said once above
            (
                f"on {d.device}",
                d.headline() + ("" if d.confidence == self.confidence else f"; {d.confidence}"),
            )
            for d in self.devices
        ]
        return items + [("across devices", a.line()) for a in self.across]

    def to_dict(self) -> dict[str, Any]:
        """The answer for a script (`explain --json`): the partition, the winner's whole identity
        (None in a tie), the leader, the ties, how sure, what it stands on, the bottleneck with
        its evidence, the levers; per device its leader (`devices`, the fastest device first)
        and the fastest device against each other (`across_devices`); the points planned and
        not measured (`planned_not_measured`: the verdict's line and each point, with why)."""
        return {
            **{k: self.identity.get(k) for k in FIXED},
            "heading": self.model,
            **answer(self.fastest, self.samples_per_s, self.identity, self.ties),
            "remeasured": self.remeasured,
            "unstable": self.unstable,
            "margin": self.margin,
            "rounds_samples_per_s": self.rounds_samples_per_s,
            "confidence": self.confidence,
            "confirmation": self.confirmation,
            "stands_on": {"text": self.stands_on, **self.stands_on_counts},
            "planned_not_measured": {"text": self.planned, "points": self.unmeasured},
            "bottleneck": None
            if self.bottleneck is None
            else {"kind": self.bottleneck, "evidence": self.evidence},
            "unclassified": self.unclassified,
            "levers": self.levers,
            "input": self.input,  # issue 31
            "not_levers": self.not_levers,
            "next_experiment": self.next_experiment,
            "cpu_speedup": self.cpu_speedup,
            "time_to_target": self.time_to_target,
            "fastest_to_target": None if self.goodput is None else self.goodput.to_dict(),
            "energy": self.energy,
            "economy": self.economy,  # issue 32
            "effective_batch": [a.to_dict() for a in self.effective_batch],
            "devices": [d.to_dict() for d in self.devices],
            "across_devices": [a.to_dict() for a in self.across],
        }


def verdicts(
    frame: pd.DataFrame,
    confirmations: list[dict[str, Any]] | None = None,
    margin: float = leaders.MARGIN,
    command: str = "sweep",
    unreached: Sequence[plan.Unreached] = (),
    stops: Mapping[Key | str, Stop] | None = None,
    noise_phase: Sequence[NoiseEntry] = (),
    target_runs: Sequence[dict[str, Any]] = (),
) -> list[ModelVerdict]:
    """One verdict per partition (model, size, model options, optimizer, lr rule: see
    science.partition) with a point that ran, in order. `confirmations`: the interleaved
    re-measurements of the leaders (run.confirm's records), where they were taken; `margin`:
    the practical difference (a share) under which a lead is a tie; `command`: what made the
    rows ("sweep" or "tune"), so that the next experiment is one that command can run;
    `unreached`: the points the runs planned and did not measure (science.plan.unreached);
    `stops`: why each grown series stopped, by its series' key, or its label in an old
    growth.json (GrowthRecord.by_series; None: not known); `noise_phase`: the B_noise a
    sweep's noise phase measured on real data (noise.json), where no convergence row has one;
    `target_runs`: the runs to the target that checked its prediction (sweep --confirm-target,
    store.target_runs)."""
    leaders.check_margin(margin)
    if frame.empty:
        return []
    if "remeasured" not in frame or frame["remeasured"].isna().all():
        # rows not read through remeasured.apply: one figure per configuration all the same
        frame = remeasured.apply(frame, confirmations)
    records = frame.to_dict("records")
    groups = grouped(records, partition_key)
    noisy = [r for r in records if finite(r.get("noise_scale_b_noise"))]  # issue 51
    found = {partition_key(c["fixed"]): c for c in confirmations or []}
    out = []
    for key in sorted(groups, key=lambda k: tuple(str(x) for x in k)):
        rows = groups[key]
        if any(standing.ran(r) for r in rows):
            missing = plan.of_partition(unreached, rows[0])
            v = _verdict(rows, found.get(key), margin, command, missing, stops)
            v.goodput = _goodput(v.identity, rows, noisy, noise_phase, target_runs)
            out.append(v)
    return out


def _goodput(
    best: dict[str, Any],
    rows: list[dict[str, Any]],
    noisy: list[dict[str, Any]],
    phase: Sequence[NoiseEntry] = (),
    target_runs: Sequence[dict[str, Any]] = (),
) -> FastestToTarget:
    """issue 51: the goodput pick over the samples/s per batch of the leader's configuration,
    at the B_noise of the convergence rows (`noisy`) of its model, size and optimizer; beside
    it the measured pick where that configuration's convergence rows reached the target, and
    B_crit fitted to their steps to target. Without convergence rows, the B_noise of the
    sweep's noise phase (`phase`); the runs that trained its pick to the target (`target_runs`)."""
    mine = configuration(best, "batch_size")
    alike = [r for r in rows if configuration(r, "batch_size") == mine]
    rates = samples_per_s_by_batch([r for r in alike if standing.ran(r)])
    same = ("model", "model_size", "optimizer")
    noise = noise_of([r for r in noisy if all(r[k] == best[k] for k in same)])
    noise = noise or noise_of_phase(phase, best)  # issue 51: the sweep's noise phase
    found = measured_of(alike, rates)
    critical = critical_of(alike)
    return goodput_answer(rates, noise, str(best["model"]), found, critical, best, target_runs)


def _verdict(
    all_rows: list[dict[str, Any]],
    confirmation: dict[str, Any] | None,
    margin: float,
    command: str,
    missing: list[plan.Unreached],
    stops: Mapping[Key | str, Stop] | None = None,
) -> ModelVerdict:
    ok = [r for r in all_rows if standing.ran(r)]
    pool = standing.pool(all_rows)  # per device: a filter on rows never decides between them
    among = varying(pool)
    lead = standing.lead(pool, confirmation, among, margin)
    best = lead.best
    v = ModelVerdict(
        heading(best),
        label(best, among),
        float(best["samples_per_s"]),
        device_of(best),
        identity=identity_dict(best),
        ties=lead.ties,
        confidence=lead.confidence,
        confirmation=lead.record,
        rounds_samples_per_s=lead.rounds_samples_per_s,
        margin=margin,
        remeasured=best.get("remeasured") is True,
        samples_per_j=standing.positive(best.get("samples_per_j")),
        unstable=_unstable(ok, among),
        tokens_per_s=standing.positive(best.get("tokens_per_s")),
        usd_per_million_samples=standing.positive(best.get("usd_per_million_samples")),
        lead_over=_lead_over(lead, pool, among),
    )
    v.stands_on, v.stands_on_counts = standing.stands_on(ok, best, among)
    # a planned point's label names what tells it from the rows, beside what they vary in
    named = varying([*all_rows, *(u.point for u in missing)])
    v.planned = plan.line(missing, named)
    v.unmeasured = [u.to_dict(named) for u in missing]
    v.devices = device_leads(ok, confirmation, among, first=v.device, margin=margin)
    v.across = across(v.devices, ok)
    # every row of the partition, failed ones too: a seed that diverged did not reach the target
    v.time_to_target = _time_to_target(all_rows)
    v.cpu_speedup = _cpu_speedup(v.across)
    judged = _bottleneck(best, ok)
    scaling = _batch_scaling(best, ok)
    if (
        judged
        and scaling
        and "step time " in judged.evidence
        and f"B={int(best['batch_size'])} (" in scaling
    ):
        scaling = None  # the label's evidence quotes the same growth (the leader is the largest)
    # rows tied with the leader by their own intervals: no lever figure comes from them
    tied = frozenset(identity(t["identity"]) for t in lead.ties)
    if judged is not None:
        kind = v.bottleneck = judged.kind
        v.evidence = [judged.evidence, *([scaling] if scaling else [])]
        # a lever's figure is a ratio of rows measured alike (the sweep's own figures), or the
        # rounds' paired comparison where they measured both
        mine, own_ok = standing.as_measured(best), [standing.as_measured(r) for r in ok]
        own_all = [standing.as_measured(r) if standing.ran(r) else r for r in all_rows]
        v.levers, v.next_experiment = levers(
            kind, mine, own_ok, own_all, among, margin, command, lead.paired, tied, missing, stops
        )
        v.not_levers = no_help(kind, mine, own_ok, among, margin, lead.paired, tied, missing)
    else:
        v.evidence = [scaling] if scaling else []
        v.unclassified, v.next_experiment = _unclassified(best, command)
    # a run that stopped before points it planned: finishing it comes first
    v.next_experiment = plan.resume(missing) or v.next_experiment
    v.input = input_lines(best, ok, margin, tied)  # issue 31
    v.energy = energy_lines(best, v.devices, ok, among)
    v.effective_batch = effective_batches(all_rows)
    v.economy = economy.lines(best, ok, all_rows, among)  # issue 32
    return v


def _lead_over(
    lead: standing.Lead, pool: list[dict[str, Any]], among: list[str]
) -> dict[str, Any] | None:
    """The leader's lead over the runner-up, as its ratio and 95% interval: in a tie over the
    closest tied configuration; else the rounds' comparison with the closest candidate they
    re-measured; else the rows' figures and intervals over the fastest other configuration.
    None where the leader had nothing to compare with."""
    keys = ("ratio", "low", "high")
    if lead.ties:
        t = standing.closest(lead.ties)[0]
        return {"label": t["label"], **{k: t.get(k) for k in keys}, "tie": True}
    by_id = {identity(r): r for r in pool}
    if lead.paired:
        ident, c = min(lead.paired.items(), key=lambda kv: kv[1].ratio)
        other = by_id.get(ident)
        name = label(other, among) if other is not None else "the runner-up"
        return {"label": name, "ratio": c.ratio, "low": c.low, "high": c.high, "tie": False}
    others = [r for r in pool if configuration(r) != configuration(lead.best)]
    if not others:
        return None
    runner = max(others, key=lambda r: float(r["samples_per_s"]))
    t = standing.row_tie(lead.best, runner, among, lead.margin)
    return {"label": t["label"], **{k: t.get(k) for k in keys}, "tie": False}


def _unstable(rows: list[dict[str, Any]], among: list[str]) -> list[str]:
    """A line per row whose own 95% interval missed its re-measurement (science.remeasured):
    its sweep figure, its interval, and the re-measured figure with its interval between
    processes."""
    out = []
    for r in rows:
        if r.get("unstable") is not True:
            continue
        low, high = leaders.interval({**r, "samples_per_s": r["sweep_samples_per_s"]})
        out.append(
            f"{label(r, among)}: its row read {number(float(r['sweep_samples_per_s']))} samples/s "
            f"(95% interval {span(low, high)}) and its interleaved re-measurement "
            f"{number(float(r['samples_per_s']))} (95% CI "
            f"{span(r['remeasured_low_samples_per_s'], r['remeasured_high_samples_per_s'])}): "
            "the row's interval did not hold when re-measured; the re-measured figure is quoted"
        )
    return out


def _unclassified(best: dict[str, Any], command: str = "sweep") -> tuple[str, str | None]:
    """Why the fastest row has no bottleneck, and what would give it one, as a flag of the
    `command` that made the rows ("sweep" or "tune"; None: nothing the user can do by
    re-running)."""
    prof = best.get("profile")
    if isinstance(prof, dict) and prof.get("skipped"):
        return (
            "its profile was skipped for its cost",
            "give each point more time (--max-time) so one profiled step costs under 10% "
            "of it, on a quieter machine",
        )
    if _norm(best.get("parallel")) not in (None, "none"):
        return "parallel points carry no profile, FLOPs or roof yet", None
    if not isinstance(prof, dict) and command == "tune":
        # tune profiles only its last round: this row was measured in an earlier one
        return (
            "tune profiles only its last round's configurations, and this one was measured "
            "before it",
            f"profile it with a sweep of it alone: {_sweep_of(best)}",
        )
    if not isinstance(prof, dict):
        return (
            "the run was measured without profiling",
            "re-run with profiling on (without --no-profile or profile = false)",
        )
    missing = [
        name
        for key, name in (
            ("flops_per_step", "a FLOP count"),
            ("peak_tflops", "a measured matmul roof"),
            ("peak_bandwidth_gb_per_s", "a measured bandwidth"),
        )
        if not finite(best.get(key))
    ]
    if missing:
        return f"the row has no {' or '.join(missing)}", None
    return "its profile, intensity and roof fit no rule", None


def _sweep_of(row: dict[str, Any]) -> str:
    """The sweep command that measures `row`'s configuration (its main axes; further settings
    as the row names them)."""
    command = (
        f"gpubench sweep --models {row['model']} --size {row.get('model_size') or 'small'} "
        f"--devices {row['device']} --precisions {row['precision']} --optimizers "
        f"{row['optimizer']} --batch-sizes {int(row['batch_size'])}"
    )
    compiled = _norm(row.get("compile"))
    return command + (f" --compile {compiled}" if compiled else "")


def _bottleneck(row: dict[str, Any], ok: list[dict[str, Any]]) -> Bottleneck | None:
    """The rules applied now, with the row's batch-size series among `ok` (issue 41: a label
    recorded by the worker was judged without it, or by older rules); the recorded label only
    where the rules give none."""
    judged = classify(row, ok)
    kind = row.get("bottleneck")
    if judged is None and isinstance(kind, str) and kind in BOTTLENECKS:
        return Bottleneck(kind, str(row.get("bottleneck_evidence") or ""))
    return judged


def _time_to_target(records: list[dict[str, Any]]) -> str | None:
    """The configuration with the least median time to target over its seeds (science.
    target_time, as batch_analysis recommends), its spread, and whether its seeds disagree."""
    summaries = target_time.summarise(records)
    if not summaries:
        return None
    best = target_time.fastest(summaries)
    if best is None and not any(s.reached for s in summaries):
        return f"no run reached the target ({len(summaries)} configurations)"
    if best is None:
        most = max(summaries, key=lambda s: (s.reached / s.runs, -(s.median_s or 0.0)))
        return (
            "no configuration reached the target in every seed "
            f"(most often {label(most.row)}: {most.describe()})"
        )
    return f"{label(best.row)}: {best.describe()}"


def _cpu_speedup(found: list[Across]) -> str | None:
    """The fastest device's fastest over the CPU's (its leader among its own rows: science.
    devices), and over the same configuration on the CPU; None where the CPU is the fastest or
    was not measured."""
    cpu = next((a for a in found if a.slower.device == "cpu"), None)
    if cpu is None:
        return None
    top = cpu.slower
    text = (
        f"{times(cpu.ratio)} the CPU's fastest ({top.fastest}, "
        f"{number(top.samples_per_s)} samples/s)"
    )
    if cpu.same is not None:
        text += f"; {times(cpu.same)} the same configuration on the CPU"
    return text


def _batch_scaling(best: dict[str, Any], records: list[dict[str, Any]]) -> str | None:
    """How step time moves across the batch sizes of the fastest point's series."""
    rows = series(best, records)
    if len({int(r["batch_size"]) for r in rows}) < 2:
        return None
    lo = min(rows, key=lambda r: int(r["batch_size"]))
    hi = max(rows, key=lambda r: int(r["batch_size"]))
    grow = float(hi["step_time_s"]) / float(lo["step_time_s"])
    return (
        f"step time {number(lo['step_time_s'] * 1e3)} -> {milliseconds(hi['step_time_s'])} "
        f"({times(grow)}) from B={int(lo['batch_size'])} to B={int(hi['batch_size'])} "
        f"(x{number(int(hi['batch_size']) // int(lo['batch_size']))})"  # an exact count
    )
