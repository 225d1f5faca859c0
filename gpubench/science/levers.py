"""The levers for a bottleneck, each with its measured effect where the sweep measured it (the
fastest point's samples/s against the same point with that one setting changed), and the next
experiment worth running: never one the run already did."""

from __future__ import annotations

from typing import Any

from gpubench.science.partition import is_on, norm, same_key

# (field, value that turns the lever on, its name, the flag that measures it)
LEVERS: dict[str, list[tuple[str, Any, str, str]]] = {
    "launch": [
        ("cuda_graph", True, "a CUDA graph", "--cuda-graph false,true"),
        ("compile", "compile", "torch.compile", "--compile eager,compile"),
    ],
    "memory": [
        ("precision", "bf16", "bf16", "--precisions fp32,bf16"),
        ("channels_last", True, "channels-last", "--channels-last false,true"),
        ("compile", "compile", "torch.compile (fusion)", "--compile eager,compile"),
    ],
    "compute": [("precision", "bf16", "a lower precision (bf16)", "--precisions fp32,bf16")],
    # at the ridge both roofs bind alike: the memory levers, whose bf16 is the compute one too
    "mixed": [
        ("precision", "bf16", "bf16", "--precisions fp32,bf16"),
        ("channels_last", True, "channels-last", "--channels-last false,true"),
        ("compile", "compile", "torch.compile (fusion)", "--compile eager,compile"),
    ],
    "input": [("data", "device", "batches made on the device", "--data device")],
}


def levers(
    kind: str,
    best: dict[str, Any],
    records: list[dict[str, Any]],
    all_rows: list[dict[str, Any]],
    among: list[str],
) -> tuple[list[str], str | None]:
    """The levers for `kind`, each with its measured effect (samples/s with it over without, at
    the fastest point's other settings) or 'not measured'; and the first unmeasured one as the
    next experiment (a larger batch when the fastest is the largest batch measured)."""
    lines, todo = [], []
    for fld, on, name, flag in LEVERS[kind]:
        if not _applies(fld, best):
            continue
        # The same point but this setting; failing that, the best at any batch size.
        same = [r for r in records if same_key(r, fld) == same_key(best, fld) and r is not best]
        anyb = [
            r
            for r in records
            if same_key(r, fld, "batch_size") == same_key(best, fld, "batch_size")
        ]
        where = "at the same batch" if same else "best of each over the batch sizes"
        if is_on(best.get(fld), on):
            off = [r for r in same or anyb if not is_on(r.get(fld), on)]
            if off:
                ratio = float(best["samples_per_s"]) / max(float(r["samples_per_s"]) for r in off)
                lines.append(f"{name}: in use, {ratio:.2f}x the samples/s without it ({where})")
            else:
                lines.append(f"{name}: in use; not measured without it")
        else:
            with_it = [r for r in same or anyb if is_on(r.get(fld), on)]
            if with_it:
                top = max(float(r["samples_per_s"]) for r in with_it)
                ratio = top / float(best["samples_per_s"])
                lines.append(f"{name}: {ratio:.2f}x the samples/s ({where}, measured)")
            else:
                lines.append(f"{name}: not measured")
                todo.append(f"measure {name}: {flag}")
    if kind in ("launch", "memory", "mixed"):
        line, todo_first = _larger_batch(best, records, all_rows)
        lines.append(line)
        todo[:0] = [todo_first] if todo_first else []
    return lines, (todo[0] if todo else None)


def _larger_batch(
    best: dict[str, Any], records: list[dict[str, Any]], all_rows: list[dict[str, Any]]
) -> tuple[str, str | None]:
    """Whether a larger batch is worth measuring: not where one of the fastest point's series
    already ran out of memory above it (all_rows holds the failed points too), nor where every
    row trains one effective batch in several ways of accumulating it (tune with one batch
    size, issue 25: the batch is the user's; the micro-batch is the lever, weighed under
    "effective batch")."""
    batches = {int(r["batch_size"]) for r in records}
    ways = {int(norm(r.get("accumulate")) or 1) for r in records}
    if len(batches) == 1 and len(ways) > 1:
        return (
            f"a larger batch: not searched, every row trains the effective batch "
            f"B={best['batch_size']} ({len(ways)} ways of accumulating it, weighed below)",
            None,
        )
    series = [
        r
        for r in records
        if same_key(r, "batch_size", "seed") == same_key(best, "batch_size", "seed")
    ]
    largest = max(int(r["batch_size"]) for r in series)
    oom = [
        int(r["batch_size"])
        for r in all_rows
        if r.get("status") == "oom"
        and same_key(r, "batch_size", "seed") == same_key(best, "batch_size", "seed")
        and int(r["batch_size"]) > largest
    ]
    if int(best["batch_size"]) != largest:
        return f"a larger batch: measured up to B={largest}, no faster", None
    if oom:
        return (
            f"a larger batch: B={largest} is the largest that fitted and the fastest; "
            f"B={min(oom)} ran out of memory",
            None,
        )
    if len({str(r["device"]) for r in records}) > 1:
        # the answer is one device's: measure that device's larger batches, not every device's
        device = str(best["device"])
        return (
            f"a larger batch: B={largest} is the largest measured on {device} and the fastest",
            f"measure larger batches on {device}: --devices {device} --batch-sizes auto",
        )
    return (
        f"a larger batch: B={largest} is the largest measured and the fastest",
        "measure larger batches: --batch-sizes auto",
    )


def _applies(fld: str, best: dict[str, Any]) -> bool:
    """CUDA graphs exist only on CUDA; channels-last helps only convolutions."""
    if fld == "cuda_graph":
        return str(best["device"]).startswith("cuda")
    if fld == "channels_last":
        prof = best.get("profile")
        cats = prof.get("category_s", {}) if isinstance(prof, dict) else {}
        return bool(cats.get("conv"))
    return True
