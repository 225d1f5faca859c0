"""The GitHub Actions template of the A/B gate (examples/github-actions/gpubench-ab.yml, shown in
docs/ci-gate.md, issue 52): what the workflow asks of GitHub (the base branch's history, the CPU
torch, the record kept when the gate fails, the gate's exit status as the check), and its
gpubench commands run as written on a pull request's clone made here: `${{ github.base_ref }}`
reads `main` as Actions would write it, and only what the page says a user adapts (the points and
--rounds) is swapped for the tiny mlp and the fewest rounds, so the test takes seconds. The pull
request leaves the code as it was: the run is also the gate's A/A (it must pass; each version
imports its own tree's gpubench; the record holds the rounds, samples and commits)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML: optuna's requirement, and the test extra's
from doc_pages import ROOT
from git_repo import git

import gpubench
from gpubench.store import ab_record

WORKFLOW = ROOT / "examples" / "github-actions" / "gpubench-ab.yml"
PACKAGE = Path(gpubench.__file__).parent
# what a user adapts, swapped for one tiny point and the fewest rounds
ADAPTED = {
    "--models": "mlp",
    "--size": "tiny",
    "--batch-sizes": "64",
    "--rounds": "6",
}


def _steps() -> list[dict[str, Any]]:
    """The workflow's one job's steps, as YAML reads them."""
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    return job["steps"]


def _gate_step() -> dict[str, Any]:
    (step,) = [s for s in _steps() if "gpubench compare" in s.get("run", "")]
    return step


def _gpubench_lines(run: str) -> list[list[str]]:
    """The `python -m gpubench ...` commands of a step's `run:` script, continuations joined,
    each as argv (the shell's words)."""
    lines = run.replace("\\\n", " ").splitlines()
    return [shlex.split(line) for line in lines if line.strip().startswith("python -m gpubench")]


def test_the_docs_show_the_template_as_it_is() -> None:
    page = (ROOT / "docs" / "ci-gate.md").read_text(encoding="utf-8")
    assert "```yaml\n" + WORKFLOW.read_text(encoding="utf-8") + "```" in page


def test_the_workflow_gates_a_pull_request_on_its_base_branch() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # PyYAML reads the bare key `on` as True (YAML 1.1)
    assert "pull_request" in (workflow.get("on") or workflow.get(True))
    steps = _steps()
    (checkout,) = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0  # the base branch's commits, not one
    install = next(s["run"] for s in steps if "pip install -e ." in s.get("run", ""))
    assert "torch==" in install and "download.pytorch.org/whl/cpu" in install
    gate = _gate_step()
    assert "continue-on-error" not in gate and "|| true" not in gate["run"]
    (argv,) = _gpubench_lines(gate["run"])
    assert argv[argv.index("--ab") + 1] == "origin/${{ github.base_ref }}"
    out = argv[argv.index("--out") + 1]
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()" and upload["with"]["path"] == f"{out}/ab.json"
    # the step order: checkout, install, gate, upload
    assert steps.index(checkout) < steps.index(gate) < steps.index(upload)


@pytest.fixture
def pull_request(tmp_path: Path) -> tuple[Path, Path]:
    """(the upstream repository with this tree's package on main, a full clone of it on a
    pull request's branch with one commit of its own), as actions/checkout leaves it."""
    upstream = tmp_path / "upstream"
    shutil.copytree(PACKAGE, upstream / "gpubench", ignore=shutil.ignore_patterns("__pycache__"))
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", ".")
    git(upstream, "commit", "-q", "-m", "base")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(upstream), str(clone)], check=True)
    git(clone, "checkout", "-q", "-b", "change")
    (clone / "NOTES").write_text("a pull request's change\n")
    git(clone, "add", "NOTES")
    git(clone, "commit", "-q", "-m", "the change")
    return upstream, clone


def test_the_workflows_gate_runs_as_written_on_a_pull_request(
    pull_request: tuple[Path, Path],
) -> None:
    upstream, clone = pull_request
    gate = _gate_step()
    run = gate["run"].replace("${{ github.base_ref }}", "main")  # what Actions writes there
    (argv,) = _gpubench_lines(run)
    assert argv[:3] == ["python", "-m", "gpubench"]
    for flag, value in ADAPTED.items():
        argv[argv.index(flag) + 1] = value
    # the step's environment; PYTHONPATH stands for `pip install -e .` of the clone
    env = {**os.environ, **{k: str(v) for k, v in gate["env"].items()}, "PYTHONPATH": str(clone)}
    done = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # the pull request leaves the code as it was: the gate's A/A, which must pass
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED" in done.stdout and "mlp/tiny" in done.stdout
    assert "6 rounds of each version in" in done.stdout
    (upload,) = [s for s in _steps() if s.get("uses", "").startswith("actions/upload-artifact@")]
    kept = clone / upload["with"]["path"]  # the artifact's path holds the record
    record = ab_record.read(kept.parent)
    assert kept.is_file() and record is not None and record.rounds == 6
    assert not record.failed and record.exit_code() == 0
    (point,) = record.points
    assert len(point.base_samples_per_s) == len(point.head_samples_per_s) == 6
    base = subprocess.run(
        ["git", "-C", str(upstream), "rev-parse", "main"], capture_output=True, text=True
    )
    assert record.base_commit == base.stdout.strip()  # origin/main: the base branch
    head = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert record.head_commit == head.stdout.strip() and not record.head_changed
    # each version imported gpubench from its own tree: the head from the clone, the base
    # from origin/main's export, a temporary folder removed when the gate ended
    assert Path(record.head_gpubench).is_relative_to(clone)
    base_tree = Path(record.base_gpubench).parent.parent
    assert not Path(record.base_gpubench).is_relative_to(clone)
    assert not base_tree.exists()
