"""A merged run folder's merge.json: what `gpubench merge` joined, with its writer (run.merge);
the report reads only its presence (a merge is finished by resuming its sources, not itself).

```
{"sources": [run folder, ...], "rows": int, "dropped": int, "replaced_failed": int,
 "machines": [machine label, ...],
 "confirmations_kept": ["partition (from run folder)", ...],
 "not_confirmed": [partition whose rows come from several run folders, ...]}
```
"""

from __future__ import annotations

from pathlib import Path

from gpubench.store.results import ResultStore

FILE = "merge.json"


def write(
    store: ResultStore,
    sources: list[Path],
    rows: int,
    dropped: int,
    replaced_failed: int,
    machines: tuple[str, ...],
    confirmations_kept: tuple[str, ...] = (),
    not_confirmed: tuple[str, ...] = (),
) -> Path:
    """merge.json in `store`'s folder: the folders merged, the rows kept, the duplicates left
    out (`dropped`) and of them the failed rows a later ok row replaced, each machine's label,
    the partitions whose source's confirmation was kept and those not confirmed."""
    return store.write_json(
        FILE,
        {
            "sources": [str(d) for d in sources],
            "rows": rows,
            "dropped": dropped,
            "replaced_failed": replaced_failed,
            "machines": list(machines),
            "confirmations_kept": list(confirmations_kept),
            "not_confirmed": list(not_confirmed),
        },
    )
