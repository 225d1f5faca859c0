"""A merged run folder's merge.json: what `gpubench merge` joined, with its writer (run.merge);
the report reads only its presence (a merge is finished by resuming its sources, not itself).

```
{"sources": [run folder, ...], "rows": int, "dropped": int, "replaced_failed": int,
 "machines": [machine label, ...]}
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
) -> Path:
    """merge.json in `store`'s folder: the folders merged, the rows kept, the duplicates left
    out (`dropped`) and of them the failed rows a later ok row replaced, each machine's label."""
    return store.write_json(
        FILE,
        {
            "sources": [str(d) for d in sources],
            "rows": rows,
            "dropped": dropped,
            "replaced_failed": replaced_failed,
            "machines": list(machines),
        },
    )
