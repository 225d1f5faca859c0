"""What max-batch prints: its probes as they end, the search's answer, and an effective batch's
accumulation plan (issue 25)."""

from __future__ import annotations

from rich.table import Table

from gpubench.cli.console import stderr, stdout
from gpubench.cli.layout import fmt, plain_table
from gpubench.config.spec import Point
from gpubench.run import maxbatch
from gpubench.run.accumulation_plan import AccumulationPlan
from gpubench.run.memory_cap import format_size


def max_batch_header(point: Point, cap: int | None, chosen: bool) -> None:
    where = point.label().removesuffix(f" B={point.batch_size}")
    capped = f"capped at {format_size(cap)}" if cap is not None else "no cap but the device's own"
    if not chosen and cap is not None:
        capped += " (the memory available now; set --max-memory to choose)"
    stderr.print(f"gpubench: largest batch of {where}, memory {capped}")


def probe_line(p: maxbatch.Probe) -> None:
    stderr.print(f"  {p.phase:>7} B={p.batch_size}: {p.status} ({p.seconds:.1f} s)")


def max_batch_result(result: maxbatch.MaxBatch) -> None:
    stdout.print(probe_table(result))
    if result.stopped:
        stdout.print(f"search stopped early: {result.stopped}")
    if result.largest == 0:
        stdout.print("not even a batch of one fits")
    else:
        more = " (the --ceiling; more may fit)" if result.ceiling_reached else ""
        within = "" if result.resolution <= 1 else f", within {result.resolution} samples"
        if result.smallest_failed is not None:
            within += f" ({result.smallest_failed} did not fit)"
        stdout.print(f"largest batch that fits: {result.largest}{more}{within}")
    searched = len(result.search_probes)
    stdout.print(
        f"probes: {searched} to search ({result.search_seconds:.1f} s), "
        f"{len(result.probes) - searched} to confirm/time"
    )
    if result.best_batch is not None:
        stdout.print(f"throughput-optimal batch: {result.best_batch}")


def accumulation_plan(found: AccumulationPlan) -> None:
    """Per checkpoint mode the largest micro-batch, and for a target effective batch the fewest
    accumulation steps a full measurement fitted (issue 25)."""
    for way in found.ways:
        r = way.search.resolution
        within = "" if r <= 1 else f", within {r} samples"
        stdout.print(
            f"checkpoint {way.checkpoint}: largest micro-batch that fits: "
            f"{way.largest_micro_batch}{within}",
            highlight=False,
        )
        for a in way.attempts:
            how = (
                f"{a.status}: {(a.error or '')[:60]}" if a.status not in ("ok", "oom") else a.status
            )
            speed = f", {a.samples_per_s:,.0f} samples/s" if a.samples_per_s else ""
            peak = f", peak {format_size(a.memory_bytes)}" if a.memory_bytes else ""
            stdout.print(
                f"  B={found.target_batch} as {a.accumulate} x {a.micro_batch}: {how}{speed}{peak}",
                highlight=False,
            )
    best = found.fewest
    if found.target_batch is not None:
        if best is None or best.answer is None:
            stdout.print(f"no way of B={found.target_batch} fitted", highlight=False)
        else:
            k, micro = best.answer.accumulate, best.answer.micro_batch
            stdout.print(
                f"fewest accumulation steps for B={found.target_batch}: {k} x {micro} "
                f"(checkpoint {best.checkpoint})",
                highlight=False,
            )


def probe_table(result: maxbatch.MaxBatch) -> Table:
    rows = (
        (
            p.phase,
            str(p.batch_size),
            # an oom's reason is the allocator's words
            f"{p.status}: {(p.error or '')[:60]}" if not p.fits and p.status != "oom" else p.status,
            fmt(p.step_time_s * 1e3 if p.step_time_s else None, ".2f"),
            fmt(p.samples_per_s, ",.0f"),
            f"{p.seconds:.1f}",
        )
        for p in result.probes
    )
    headers = ("phase", "batch", "outcome", "step ms", "samples/s", "seconds")
    return plain_table("max-batch probes", headers, rows, headers[3:] + headers[1:2])
