"""Issue 23: a torchrun launch on two nodes (here two agents on this machine, one gloo rank
each) splits a strong point's global batch over the whole world, and its row names its nodes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from gpubench.store.results import read_rows

TESTS = Path(__file__).resolve().parent
SUITE = """
name = "two-nodes"
models = ["mlp"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [8]
optimizers = ["sgd"]
parallel = ["ddp"]
nproc = [1]
scaling = ["strong"]
[budget]
warmup_steps = 1
min_steps = 2
max_steps = 2
profile_steps = 0
min_time_s = 0
max_time_s = 1
warmup_min_s = 0
warmup_max_s = 0
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.slow  # two torchrun agents
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun on PATH")
def test_two_nodes_of_one_process_split_the_global_batch(tmp_path: Path) -> None:
    suite = tmp_path / "two.toml"
    suite.write_text(SUITE)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    endpoint = f"127.0.0.1:{_free_port()}"

    def command(rank: int) -> list[str]:
        return [
            "torchrun", "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(rank),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "i23",
            "-m", "gpubench", "sweep", str(suite), "--out", str(out), "--no-report",
        ]  # fmt: skip

    agents = [
        subprocess.Popen(
            command(rank), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for rank in (0, 1)
    ]
    logs = [a.communicate(timeout=240)[0] for a in agents]
    assert [a.returncode for a in agents] == [0, 0], logs[0][-2000:]
    (row,) = read_rows(out)
    # before issue 23: each node's one process trained all 8 samples, 16 a step in all
    assert (row["global_batch_size"], row["per_process_batch_size"]) == (8, 4)
    assert (row["nproc"], row["nodes"], row["scaling"], row["world_size"]) == (1, 2, "strong", 2)
    assert row["scaling_efficiency"] is None  # its baseline (one node) is not in this folder
    # --no-report: rank 0 (on either node) says so where the report's path would be, and
    # draws none
    assert "report: not drawn (--no-report)" in "".join(logs)
    assert not (out / "report.html").exists()
