"""The parallel axes (issue 17): parallel, nproc and scaling in suites, flags and rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.cli.main import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.config.validate import validate
from gpubench.store.row import make_row

SUITE = """
name = "p"
models = ["mlp"]
devices = ["cpu"]
batch_sizes = [8]
parallel = ["none", "ddp"]
nproc = [4, 1, 2]
scaling = "strong"
"""


def test_parallel_axes_expand_with_one_process_points_once(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(SUITE)
    layouts = [(p.parallel, p.nproc, p.scaling) for p in load_suite(path).points()]
    assert layouts == [
        ("none", 1, None),
        ("ddp", 1, None),  # issue 23: one process is the baseline of weak and strong alike
        ("ddp", 2, "strong"),
        ("ddp", 4, "strong"),
    ]


def test_defaults_keep_todays_points() -> None:
    (point,) = SweepSpec("s", models=("mlp",), devices=("cpu",), batch_sizes=(8,)).points()
    assert point == Point("mlp", "small", "cpu", "fp32", "sgd", 8)
    assert (point.parallel, point.nproc, point.scaling) == ("none", 1, None)
    assert "ddp" not in point.label()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('parallel = ["dp"]', "unknown parallel mode 'dp'; allowed: none, ddp, fsdp"),
        ("nproc = [0]", "invalid nproc 0; allowed: a whole number of 1 or more"),
        ('scaling = ["both"]', "unknown scaling 'both'; allowed: weak, strong"),
    ],
)
def test_bad_parallel_values_name_what_is_allowed(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(f'name = "b"\nmodels = ["mlp"]\n{line}\n')
    with pytest.raises(ConfigError, match=message):
        load_suite(path)


def test_parallel_convergence_is_refused() -> None:
    spec = SweepSpec("c", models=("mlp",), mode="convergence", parallel=("ddp",))
    with pytest.raises(ConfigError, match="parallel points measure speed only"):
        validate(spec)


def test_bad_flag_is_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "quick", "--nproc", "two"]) == 2
    assert "invalid nproc 'two'" in capsys.readouterr().err


def test_a_row_of_before_keeps_its_point() -> None:
    row = make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", 4), "ok")
    old = {k: v for k, v in row.items() if k not in ("parallel", "nproc", "scaling")}
    fields = Point.__dataclass_fields__
    assert Point(**{k: old[k] for k in fields if k in old}) == Point(
        "mlp", "tiny", "cpu", "fp32", "sgd", 4
    )
