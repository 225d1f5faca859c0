"""Every torchrun command in README.md and docs/*.md runs, as written, with torchrun on the CPU.

The commands are read from the pages (each line of a code block that starts with `torchrun`,
continuation lines joined, each distinct command once: tests/doc_pages.py), so the pages and
this test cannot drift apart. Each runs in a temporary folder (its `--out results/...` lands
there) with two changes that leave its form whole: the suite is shrunk by gpubench's own
documented flags, appended after the command's (`--models mlp --batch-sizes 16 --parallel ddp
--scaling weak --steps 2 --devices cpu`: one DDP point per nproc on the tiny MLP, on the CPU on
every machine: the scaling suite's devices are `auto`, and on a host with fewer GPUs than
--nproc-per-node its CUDA points are `unsupported` rows, tests/test_cpu_points_on_gpu_host.py),
and a multi-node command (`--nnodes N`) runs as N agents on this machine, its `--rdzv-endpoint`
host:port (the first node's address) replaced by 127.0.0.1 and a free port, and `--no-report`
appended too (the report a launch's rank 0 draws is the single-node command's to show). Four
processes per node on this machine's cores is slow, not wrong: gloo ranks of one thread each."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from doc_pages import torchrun_lines

from gpubench.run.ranks import free_port
from gpubench.store.results import read_rows

ROOT = Path(__file__).resolve().parent.parent
SHRINK = ["--models", "mlp", "--batch-sizes", "16", "--parallel", "ddp", "--scaling", "weak"]
SHRINK += ["--steps", "2", "--devices", "cpu", "--no-profile"]

pytestmark = [
    pytest.mark.slow,  # up to eight torch processes at once
    pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun on PATH"),
]


def _option(argv: list[str], name: str) -> str | None:
    """The value of torchrun's option `name` in `argv` (before its script), or None."""
    for i, word in enumerate(argv[: argv.index("-m")]):
        if word == name:
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def run_as_written(argv: list[str], cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    """`argv` with SHRINK appended, as one agent per node, all on this machine."""
    nodes = int(_option(argv, "--nnodes") or 1)
    endpoint = _option(argv, "--rdzv-endpoint")
    if endpoint is not None:
        argv = [w.replace(endpoint, f"127.0.0.1:{free_port()}") for w in argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shrink = [*SHRINK, "--no-report"] if nodes > 1 else SHRINK
    agents = [
        subprocess.Popen(
            [*argv, *shrink],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(nodes)
    ]
    done = []
    for agent in agents:
        out, err = agent.communicate(timeout=600)
        done.append(subprocess.CompletedProcess(agent.args, agent.returncode, out, err))
    return done


def test_the_readme_has_torchrun_commands() -> None:
    commands = torchrun_lines()
    assert len(commands) >= 2 and any(_option(c, "--nnodes") for c in commands)


@pytest.mark.parametrize(
    "argv",
    torchrun_lines(),
    ids=lambda argv: " ".join(argv[1:5]),
)
def test_a_readme_torchrun_command_runs_as_written(argv: list[str], tmp_path: Path) -> None:
    for done in run_as_written(argv, tmp_path):
        assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / argv[argv.index("--out") + 1]
    rows = read_rows(out)
    nodes = int(_option(argv, "--nnodes") or 1)
    per_node = int(_option(argv, "--nproc-per-node") or 1)
    assert rows and all(r["status"] == "ok" for r in rows), rows
    assert {(r["nproc"], r["world_size"]) for r in rows} == {(per_node, nodes * per_node)}
    # rank 0 draws the launch's report once its points are done (not asked to on several nodes)
    assert (out / "report.html").is_file() == (nodes == 1)
