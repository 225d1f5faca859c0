"""The package's rooms follow the flow: each stage imports only the stages below it, so the
folder tree reads as the data flow (README, "How it is built")."""

from __future__ import annotations

import ast
from pathlib import Path

import gpubench

ROOT = Path(gpubench.__file__).parent
# Lowest first. A module may import from its own stage and any stage before it in this list.
STAGES = [
    ("models", "data"),  # workloads and data sets
    ("config",),  # the spec, suite files, precisions, validation
    ("probes",),  # observers of a measurement
    ("store",),  # the row schema, the results store, env capture
    ("harness",),  # one point's training step and measurement
    ("science",),  # convergence runs and the batch-size analysis
    ("run",),  # the sweep and its worker processes
    ("report",),  # HTML, charts, compare
    ("tune",),  # the search for the fastest configuration (runs, then explains, its rows)
    ("cli",),  # the command line and the pytest plugin
]
RANK = {name: i for i, names in enumerate(STAGES) for name in names}


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "gpubench" else None


def _imports(tree: ast.AST) -> set[str]:
    """Every gpubench module `tree` imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gpubench":
                out.update(f"gpubench.{a.name}" for a in node.names)
            else:
                out.add(node.module)
    return {m for m in out if m.startswith("gpubench.")}


def upward_imports() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if len(rel.parts) == 1:
            continue  # gpubench/__init__.py and __main__.py face the user: they sit on top
        own = rel.parts[0]
        assert own in RANK, f"{rel}: a stage missing from STAGES"
        for module in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            stage = _stage(module)
            if stage is not None and stage in RANK and RANK[stage] > RANK[own]:
                bad.append(f"{rel} imports {module}")
    return bad


def test_every_stage_imports_only_the_stages_below_it() -> None:
    assert upward_imports() == []


def test_every_module_lives_in_a_stage() -> None:
    loose = [p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == []
    rooms = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert rooms == set(RANK)
