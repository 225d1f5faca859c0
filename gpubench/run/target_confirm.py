"""`sweep --confirm-target` (issue 51, item 5): a speed sweep's predicted "fastest to target"
checked by training. After the confirmation, each verdict whose fastest to target was predicted
(a reference model whose noise phase measured B_noise) trains the predicted batch, the
throughput-fastest batch and the measured batch between them (science.target_check.batches_for)
to the model's target on its real data, SEEDS seeds each, in the leader's configuration (its
device, precision and settings), with the shipped convergence suite's settings (target, data
set, evaluation gaps, warm-up, base learning rate scaled by its rule, time limit) and the model
at its own input size, the shape its speed points measured (config.suite.target_settings),
without measuring the noise scale. Each run is a convergence row in target_runs.jsonl
(store.target_runs), on disk before the next starts; a resumed sweep trains only the runs the
file lacks. The verdict then says predicted against measured (science.target_check).

Only rows of the suite's own models are read (a folder's rows never choose code to build), and
only verdicts that the sweep's own phase made predictable are trained: what a prediction needs
is said by the verdict where it has none.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.config.convergence import Convergence
from gpubench.config.spec import Point, SweepSpec
from gpubench.config.suite import target_settings
from gpubench.data import catalog
from gpubench.run.noise_sweep import REFERENCE_MODELS
from gpubench.run.worker import WorkerRunner
from gpubench.science.target_check import batches_for
from gpubench.science.verdict import verdicts
from gpubench.store import confirmations, noise_record, target_runs
from gpubench.store.results import load_results

PHASE = "target confirmation (training to the target)"
SEEDS = 3  # each batch's seeds: a median over 3, with the fastest and slowest beside it

OnRun = Callable[[dict[str, Any], int, int], None]  # (row, runs done, runs in all)


@dataclass(frozen=True)
class Planned:
    """One verdict's runs to the target: its leader's configuration (`leader`, the speed row's
    identity) at each of `batches`, seeds `leader`'s seed and the next SEEDS - 1, trained under
    `conv` (the convergence suite's settings for its optimizer)."""

    leader: dict[str, Any]
    batches: tuple[int, ...]
    conv: Convergence

    def points(self) -> list[Point]:
        """The runs, each a convergence point: the leader's settings with the batch, the seed,
        the convergence suite's learning-rate rule for its optimizer and the data set kept on
        the device. Seed by seed, each seed's batches in turn: a machine that slows meanwhile
        slows every batch alike, not the last one trained."""
        base = Point.of(self.leader)
        rule = self.conv.lr_scaling_for(base.optimizer)[0]
        base = dataclasses.replace(base, lr_scaling=rule, data="device")
        return [
            dataclasses.replace(base, batch_size=b, seed=base.seed + s)
            for s in range(SEEDS)
            for b in self.batches
        ]


def plan(run_dir: Path, spec: SweepSpec) -> list[Planned]:
    """The runs each verdict of `run_dir`'s rows (those of `spec`'s models) needs: one Planned
    per verdict of a reference model with a prediction, in the verdicts' order; no batch above
    the data set's training samples trains (a throughput-fastest one left out is said in one
    warning)."""
    frame = load_results(run_dir)
    frame = frame[frame["model"].isin([m for m in spec.models if m in REFERENCE_MODELS])]
    if frame.empty:
        return []
    found = confirmations.partitions(run_dir)
    noise = noise_record.read(run_dir)
    entries = noise.entries if noise is not None else ()
    out = []
    for v in verdicts(frame, found, noise_phase=entries):
        pick = v.goodput.pick if v.goodput is not None else None
        if pick is None:
            continue
        leader = dict(v.identity)
        model, size = str(leader["model"]), str(leader["model_size"])
        # the runs time training alone: measuring B_noise on one step in 4 added 24% to
        # cnn/tiny's time at B=16 and 11% at B=64, a bias against the smaller batch
        conv = dataclasses.replace(target_settings(str(leader["optimizer"])), noise_every_steps=0)
        ds, _ = catalog.load(model, size, conv.dataset, conv.data_dir, conv.image_size)
        top = pick.throughput_batch
        if top > ds.train_size:
            warnings.warn(
                f"--confirm-target: {v.model}: the throughput-fastest B={top} not trained "
                f"(above the {ds.train_size} training samples of {ds.name}); the largest "
                "measured batch that fits stands in for it",
                stacklevel=2,
            )
        batches = batches_for(pick, ds.train_size)
        if batches:
            out.append(Planned(leader, batches, conv))
    return out


def not_due(run_dir: Path, spec: SweepSpec, sharded: bool) -> str | None:
    """Why `spec`'s sweep into `run_dir` has no prediction to train (a warning's words), or
    None where it may have: a speed sweep, not one shard of it, with a noise phase's record."""
    if spec.mode != "speed":
        return "a convergence sweep measures its times to target itself"
    if sharded:
        return "a shard holds only some of the rows: resume the whole sweep with it"
    if not (run_dir / noise_record.FILE).is_file():
        return (
            "no B_noise was measured (the noise phase runs for the reference models on "
            "synthetic batches with a noise budget above 0: --noise-budget S)"
        )
    return None


def run(
    run_dir: Path,
    spec: SweepSpec,
    runner: WorkerRunner,
    should_stop: Callable[[], bool] | None = None,
    on_run: OnRun | None = None,
) -> int:
    """Train every run `plan` names that target_runs.jsonl lacks, in `runner`'s worker, each
    row appended before the next starts; stop before a run where `should_stop` says so.
    Returns the runs trained now."""
    target_runs.repair(run_dir)
    done = {Point.of(r).key() for r in target_runs.read(run_dir)}
    todo = [(p, planned.conv) for planned in plan(run_dir, spec) for p in planned.points()]
    left = [(p, conv) for p, conv in todo if p.key() not in done]
    trained = 0
    for point, conv in left:
        if should_stop is not None and should_stop():
            break
        row = runner.run(point, conv)
        target_runs.append(run_dir, row)
        trained += 1
        if on_run is not None:
            on_run(row, len(todo) - len(left) + trained, len(todo))
    return trained
