"""The registry of settings (config.registry): a setting is one entry, and every stage reads it.

The first test adds a throwaway boolean setting to the registry in a fresh interpreter, before
any other gpubench module is imported, and finds it as a CLI flag, a suite key, a Point field
and sweep axis, a row column, a label word and a verdict lever: no other module names it. A
second throwaway setting that needs convolutions is refused on an MLP point by its entry alone
(config.needs), and measured on the CNN."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from gpubench.config import labels, registry
from gpubench.config.keys import FIXED, configuration, identity
from gpubench.config.spec import AXES, Point, SweepSpec
from gpubench.store.row import IDENTITY

THROWAWAY = textwrap.dedent(
    """
    import dataclasses, sys
    from gpubench.config import registry
    registry.SETTINGS.append(
        registry.Setting("fused_norm", bool, False, axis="fused_norm", on=True,
                         word="fused norm", levers=("launch",), lever="a fused norm",
                         help=": fuse the norm layers", heading="fused norm")
    )
    registry.BY_NAME["fused_norm"] = registry.SETTINGS[-1]
    # a setting that needs convolutions: its entry alone has the harness refuse it without them
    registry.SETTINGS.append(
        registry.Setting("winograd", bool, False, axis="winograd", on=True, needs=("conv",))
    )
    registry.BY_NAME["winograd"] = registry.SETTINGS[-1]

    from gpubench.cli.parser import build_parser
    from gpubench.cli.sweep_args import spec_from_args
    from gpubench.config.labels import label
    from gpubench.config.suite import load_suite
    from gpubench.science.levers import levers
    from gpubench.store.row import COLUMNS, make_row

    suite = sys.argv[1]
    # a suite key
    spec = load_suite(suite)
    assert spec.fused_norm == (False, True), spec.fused_norm
    points = spec.points()
    assert [p.fused_norm for p in points] == [False, True], points
    # a CLI flag, over the suite's value
    args = build_parser().parse_args(["sweep", suite, "--fused-norm", "true"])
    assert spec_from_args(args).fused_norm == (True,)
    # a row column, and a label word
    off, on = (make_row(p, "ok", samples_per_s=s) for p, s in zip(points, (100.0, 150.0)))
    assert "fused_norm" in COLUMNS and on["fused_norm"] is True
    assert label(on) == "cpu fp32 B=4 (fused norm)" and label(off) == "cpu fp32 B=4", label(on)
    # a verdict lever, measured: on is 1.5x off at the same batch
    lines, todo = levers("launch", on, [off, on], [off, on], among=["fused_norm"])
    assert any(t.startswith("a fused norm: in use, x1.50") for t in lines), lines
    # refused on an MLP point (an `unsupported` row in the registry's words), not on the CNN
    from gpubench.config.spec import Budget
    from gpubench.harness.point import measure_point
    mlp = dataclasses.replace(points[0], winograd=True)
    row = measure_point(mlp, Budget.fixed(2, 1))
    why = "winograd applies to convolutional models; mlp has no Conv2d"
    assert row["status"] == "unsupported" and row["error"] == why, row
    from gpubench.harness.step import build_workload, unsupported_reason
    cnn = dataclasses.replace(mlp, model="cnn")
    assert unsupported_reason(cnn, build_workload(cnn)) is None
    print("ok")
    """
)


def test_a_new_setting_is_one_entry_in_the_registry(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(
        'models = ["mlp"]\nsize = "tiny"\ndevices = ["cpu"]\nbatch_sizes = [4]\n'
        "fused_norm = [false, true]\n",
        encoding="utf-8",
    )
    script = tmp_path / "throwaway.py"
    script.write_text(THROWAWAY, encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(script), str(suite)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**__import__("os").environ, "PYTHONPATH": str(root)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_point_sweep_row_and_partition_are_the_registry() -> None:
    names = [s.name for s in registry.SETTINGS]
    assert [f for f in Point.__dataclass_fields__] == names == IDENTITY
    axes = {s.axis for s in registry.SETTINGS if s.axis is not None}
    assert axes <= set(SweepSpec.__dataclass_fields__)
    assert set(AXES) <= axes
    assert set(FIXED) == {s.name for s in registry.SETTINGS if s.role == "fixed"}


def test_an_old_row_reads_as_measured_at_the_defaults() -> None:
    """A row written before later settings existed (the column missing) or read back from a
    frame (NaN, 1.0) is the same configuration as today's row at the defaults."""
    new = Point("mlp", "small", "cpu", "fp32", "sgd", 16).to_dict()
    old = {k: new[k] for k in ("model", "model_size", "device", "precision", "optimizer")}
    old |= {"batch_size": 16.0, "seed": 0, "parallel": float("nan"), "cudnn_benchmark": None}
    assert identity(old) == identity(new)
    assert configuration(old) == configuration(new)
    assert Point.of(old) == Point.of(new) == Point("mlp", "small", "cpu", "fp32", "sgd", 16)


def test_each_setting_is_worded_one_way() -> None:
    row = Point(
        "mlp", "small", "cpu", "bf16", "adamw", 64, compile="compile", accumulate=4, threads=2
    ).to_dict()
    assert labels.label(row) == "cpu bf16 2 threads B=64 as 4 x 16 (compiled)"
    assert labels.label(row, whole=True).startswith("mlp/small cpu bf16 adamw 2 threads B=64")
    assert labels.extras(row) == ["2 threads", "as 4 x 16", "compiled"]
    assert labels.varying([row, {**row, "precision": "fp32"}]) == ["precision"]


def test_a_setting_refuses_a_bad_value_naming_what_is_allowed() -> None:
    import pytest

    from gpubench.config.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown compile mode 'fast'; allowed: eager, compile"):
        registry.BY_NAME["compile"].checked("fast")
    with pytest.raises(ConfigError, match="cuda_graph"):
        registry.BY_NAME["cuda_graph"].checked("yes")
