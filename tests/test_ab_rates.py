"""scripts/ab_rates.py (issue 52's detection-rate figures): how it sizes the head's extra work
from measured costs, and that the head it commits runs that work in its own harness while the
base's step stays the plain one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ab_rates import choose, make_repo

POINT = ["--models", "mlp", "--size", "tiny", "--batch-sizes", "64"]
# in each tree named in argv, that tree's gpubench (one process: torch is imported once, and
# gpubench again from each tree): the tiny mlp's prepared step once, each forward's batch size
_FORWARDS = f"""
import json
import sys
for tree in sys.argv[1:]:
    for name in [n for n in sys.modules if n.split(".")[0] == "gpubench"]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    import gpubench
    from gpubench.cli import ab_args, parser
    from gpubench.harness.step import build_workload, prepare
    args = parser.build_parser().parse_args(["compare", "--ab", "base", *{POINT!r}])
    (point,) = ab_args.points_from_args(args)
    prepared = prepare(point, build_workload(point))
    sizes = []
    prepared.trainer.model.register_forward_pre_hook(lambda m, a: sizes.append(a[0].shape[0]))
    prepared.step()
    print(json.dumps({{"sizes": sizes, "gpubench": gpubench.__file__, "label": point.label()}}))
    sys.path.remove(tree)
"""


def test_the_extra_samples_are_interpolated_between_the_measured_costs() -> None:
    costs = {1: 0.0, 2: 0.0, 4: 0.0, 8: 0.06, 16: 0.12, 32: 0.12, 64: 0.32}
    assert choose(costs, 0.2) == (45, 1)  # 32 + (0.2 - 0.12) / 0.2 * 32
    assert choose(costs, 0.06) == (8, 1)
    assert choose(costs, 0.03) == (6, 1)
    assert choose(costs, 0.64) == (64, 2)  # the whole batch's forward, twice
    assert choose({1: 0.3, 2: 0.4}, 0.1) == (1, 1)  # none below: the least k


def _forwards(trees: list[Path], cwd: Path) -> list[dict[str, object]]:
    """Per tree of `trees`, its forwards' batch sizes, its gpubench and the point's label."""
    done = subprocess.run(
        [sys.executable, "-c", _FORWARDS, *map(str, trees)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": "", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(trees) :]]


@pytest.mark.slow
def test_the_slowed_head_runs_its_extra_forwards_and_the_base_does_not(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    label = "mlp/tiny cpu fp32 adamw 1 thread B=64"
    branches = make_repo(repo, {0.2: {label: (8, 2)}})
    assert branches == {0.0: "base", 0.2: "slow-0.2"}
    slow = tmp_path / "slow"  # the slowed branch's tree beside the base's
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "-q", str(slow), "slow-0.2"], check=True
    )
    base, slowed = _forwards([repo, slow], tmp_path)
    assert base["label"] == label and base["sizes"] == [64]
    assert Path(str(base["gpubench"])).is_relative_to(repo)
    assert Path(str(slowed["gpubench"])).is_relative_to(slow)
    assert slowed["sizes"] == [8, 8, 64]  # two gradient-free forwards on 8 samples
