"""`gpubench compare --ab BASE_REF`: the A/B gate (run.ab for points, run.ab_pytest for
pytest-benchmark tests with --pytest) run and told: a line per point or benchmark (its head/base
ratio, 95% interval and reading), the answer with the time it took and its rounds, and the
record (ab.json) in --out. Exit status 0 where none is slower beyond the margin, 1 where one is
(or a version failed to measure), 2 for a bad input (one line naming it)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpubench.cli import ab_args
from gpubench.config.spec import Point
from gpubench.store.ab_record import ABRecord
from gpubench.store.wording import number, percent, plural, printable, seconds, span, times


def run(args: argparse.Namespace) -> int:
    from gpubench.cli.commands import reserved_run_dir
    from gpubench.config.errors import ConfigError
    from gpubench.run import ab, ab_pytest, base_tree
    from gpubench.run.interrupt import terminated_raises

    if args.pytest is not None:
        ab_pytest.needs()
    points = ab_args.points_from_args(args) if args.pytest is None else []
    margin = (args.margin if args.margin is not None else ab_args.DEFAULT_MARGIN_PCT) / 100
    rounds = args.rounds if args.rounds is not None else ab_args.DEFAULT_ROUNDS
    with terminated_raises(), base_tree.exported(args.ab) as trees:
        tests = None if args.pytest is None else ab_pytest.selection(args.pytest, trees)
        out: Path = args.out if args.out is not None else reserved_run_dir()
        made = not out.exists()
        out.mkdir(parents=True, exist_ok=True)  # before measuring: an unwritable one fails now
        head = trees.head_commit[:7] + (" + uncommitted changes" if trees.head_changed else "")
        what = plural(len(points), "point") if tests is None else "pytest " + " ".join(tests)
        print(
            printable(
                f"A/B: the working tree ({head}) against {args.ab} ({trees.base_commit[:7]}): "
                f"{what}, {rounds} rounds, margin {percent(margin)}"
            ),
            file=sys.stderr,
        )
        try:
            if tests is None:
                record = ab.measure(trees, points, margin, rounds, on_round=_progress)
            else:
                record = ab_pytest.measure(trees, tests, margin, rounds, on_round=_progress)
        except ab.ABError as e:
            if e.detail:
                print(e.detail, file=sys.stderr)
            print(f"gpubench: error: {printable(str(e))}", file=sys.stderr)
            return 1
        except ConfigError:  # a bad input found measuring (no benchmark collected): nothing kept
            if made and not any(out.iterdir()):
                out.rmdir()
            raise
    path = record.write(out)
    if args.format == "json":
        print(json.dumps(record.to_dict(), indent=2))
    else:
        print(printable(told(record, path), lines=True))
    return record.exit_code()


def _progress(done: int, of: int) -> None:
    print(f"round {done} of {of} done", file=sys.stderr, flush=True)


def told(record: ABRecord, path: Path | None = None) -> str:
    """The gate's answer as text: a line per point, then PASSED or FAILED with the points
    slower beyond the margin, the time it took and its rounds (and where the record is)."""
    labels = [p.benchmark or Point.of(p.point).label() for p in record.points]
    noun = "point" if record.pytest is None else "benchmark"
    width = max([len(noun), *map(len, labels)])
    lines = [f"{noun.ljust(width)}  head/base  95% CI         reading"]
    for label, p in zip(labels, record.points, strict=True):
        cells = f"{times(p.ratio):<9}  {span(p.low, p.high):<13}  {p.reading}"
        lines.append(f"{label.ljust(width)}  {cells}")
    margin = percent(record.margin)
    took = f"{plural(record.rounds, 'round')} of each version in {seconds(record.seconds)}"
    failed = [label for label, p in zip(labels, record.points, strict=True) if p.fails]
    if failed:
        lines.append(
            f"FAILED: {plural(len(failed), noun)} slower than the base by more than {margin} "
            f"(95% interval of head/base below 1/(1+{margin})): {'; '.join(failed)} ({took})"
        )
    elif not record.points:
        none = "no point measured" if record.pytest is None else "no benchmark ran in both versions"
        lines.append(f"FAILED: {none}, nothing compared ({took})")
    else:
        faster = sum(p.reading == "faster" for p in record.points)
        unsure = sum(p.reading == "cannot tell" for p in record.points)
        lines.append(
            f"PASSED: no {noun} slower than the base by more than {margin}"
            + (f"; {plural(faster, noun)} faster beyond it" if faster else "")
            + (
                f"; {plural(unsure, 'interval')} wider than the margin (cannot tell: more "
                "--rounds narrow it)"
                if unsure
                else ""
            )
            + f" ({took})"
        )
    if record.busy:
        cores = record.other_load_cores
        lines.append(
            "the machine was busy meanwhile"
            + (f" (other processes used up to {number(cores, 2)} cores)" if cores else "")
            + ": the rounds' ratios cancel what falls on both versions alike"
        )
    if record.unmatched:
        lines.append(f"not compared, run by one version only: {'; '.join(record.unmatched)}")
    if path is not None:
        lines.append(f"record: {path}")
    return "\n".join(lines)
