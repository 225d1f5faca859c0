"""Convergence points run in worker processes exactly like speed points: a point that runs out
of memory under --max-memory, hangs past --point-timeout or is killed becomes its row, and the
sweep goes on."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from isolation import memory_cap, rows

from gpubench.cli import main
from gpubench.config.convergence import Convergence
from gpubench.config.spec import Point
from gpubench.config.suite import load_suite
from gpubench.run.memory_cap import exact_size
from gpubench.run.sweep import run_sweep
from gpubench.run.worker import WorkerRunner

# The MLP reaches 10% held-out accuracy at its first evaluation; the CNN never reaches 100% in
# a billion steps, so it trains until something stops it.
ENDLESS = """
name = "endless"
mode = "convergence"
models = ["mlp", "cnn"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [8]
precisions = ["fp32"]
optimizers = ["sgd"]

[convergence]
image_size = 8
target = { mlp = 0.1, cnn = 1.0 }
stop_at_target = true
max_steps = 1_000_000_000
eval_every_steps = 5
eval_samples = 64
noise_every_steps = 0
"""


def test_a_convergence_point_past_the_point_timeout_is_a_timeout_row(tmp_path: Path) -> None:
    suite = tmp_path / "endless.toml"
    suite.write_text(ENDLESS)
    out = tmp_path / "run"
    # The point that must end ok runs under a generous timeout; the sweep stops after it and is
    # resumed under a short one, which only the endless point then meets (no race either way).
    spec = load_suite(suite)
    run_sweep(
        spec, out, point_timeout_s=300, should_stop=lambda: out.joinpath("results.jsonl").exists()
    )
    run_sweep(spec, out, point_timeout_s=2, resume=True)
    got = {r["model"]: r for r in rows(out)}
    assert got["mlp"]["status"] == "ok" and got["mlp"]["steps_to_target"] is not None
    assert got["cnn"]["status"] == "timeout"
    assert "no result within 2 s (--point-timeout)" in got["cnn"]["error"]


# 64-pixel digits: the tiny CNN holds about 1 MiB of activations per sample, so B=1024 cannot
# fit a cap 640 MiB above the worker's footprint, while B=4 (and the data set) fits.
LARGE_IMAGES = """
name = "large-images"
mode = "convergence"
models = ["cnn"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [4, 1024, 1400]
precisions = ["fp32"]
optimizers = ["sgd"]

[convergence]
image_size = 64
max_steps = 2
eval_every_steps = 2
eval_samples = 16
noise_every_steps = 0
"""


def test_a_convergence_point_over_the_memory_cap_is_an_oom_row(tmp_path: Path) -> None:
    suite = tmp_path / "large.toml"
    suite.write_text(LARGE_IMAGES)
    out = tmp_path / "run"
    args = ["sweep", str(suite), "--out", str(out), "--quiet"]
    assert main([*args, "--max-memory", exact_size(memory_cap(640))]) == 0
    got = {r["batch_size"]: r for r in rows(out)}
    assert got[4]["status"] == "ok" and got[4]["steps_measured"] == 2
    assert got[1024]["status"] == "oom", got[1024]["error"]
    assert "can't allocate memory" in got[1024]["error"] and "--max-memory" in got[1024]["error"]
    assert got[1400]["error"] == "skipped: B=1024 ran out of memory"


def test_a_killed_convergence_worker_is_an_error_row_and_the_next_point_runs() -> None:
    endless = Convergence(
        image_size=8, max_steps=10**9, eval_every_steps=5, eval_samples=64, noise_every_steps=0
    )
    quick = Convergence(image_size=8, max_steps=5, eval_every_steps=5, noise_every_steps=0)
    point = Point("cnn", "tiny", "cpu", "fp32", "sgd", 8, lr_scaling="none")
    runner = WorkerRunner(point_timeout_s=60)
    try:
        assert runner.run(point, quick)["status"] == "ok"
        worker = runner._proc  # the worker that served it serves the next point too
        assert worker is not None and worker.pid is not None
        killer = threading.Timer(1.0, lambda: os.kill(worker.pid, signal.SIGKILL))
        killer.start()
        started = time.perf_counter()
        row = runner.run(point, endless)
        killer.join()
        assert row["status"] == "error" and "signal SIGKILL" in row["error"], row["error"]
        assert time.perf_counter() - started < 30
        assert runner.run(point, quick)["status"] == "ok"
    finally:
        runner.close()
