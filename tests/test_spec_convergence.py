from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.config.suite import load_suite

SUITE = """
name = "c"
mode = "convergence"
models = ["mlp", "transformer"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [8, 32]
optimizers = ["sgd", "adamw"]

[convergence]
target = { mlp = 0.9, transformer = 3.0 }
lr_scaling = ["auto", "none"]
max_steps = 100
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(text)
    return path


def test_convergence_table_and_lr_scaling_axis(tmp_path: Path) -> None:
    spec = load_suite(write(tmp_path, SUITE))
    conv = spec.convergence
    assert conv.target_for("mlp") == 0.9 and conv.target_for("transformer") == 3.0
    assert conv.max_steps == 100 and conv.time_limit_s() is None
    points = spec.points()
    # auto is linear for SGD and sqrt for AdamW; none is added to both
    assert {(p.optimizer, p.lr_scaling) for p in points} == {
        ("sgd", "linear"),
        ("sgd", "none"),
        ("adamw", "sqrt"),
        ("adamw", "none"),
    }
    assert len(points) == 2 * 2 * 2 * 2 and len(set(points)) == len(points)
    assert Point("mlp", "tiny", "cpu", "fp32", "sgd", 8).lr_scaling is None  # speed points


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("max_steps = 100", "max_step = 100"), "unknown key convergence.'max_step'"),
        (('["auto", "none"]', '"cubic"'), "unknown convergence.lr_scaling 'cubic'"),
        (("max_steps = 100", "max_steps = -1"), "invalid convergence.max_steps -1"),
        (("max_steps = 100", 'max_steps = "a"'), "convergence.max_steps must be int"),
        (("transformer = 3.0", "cnn = 3.0"), "convergence.target names cnn, not in models"),
        (("max_steps = 100", 'dataset = "digits"'), "'transformer' cannot train on"),
        (("max_steps = 100", 'data_dir = "/no/such/dir"'), "does not exist"),
        (('mode = "convergence"', 'mode = "learn"'), "unknown mode 'learn'"),
    ],
)
def test_bad_convergence_settings_name_the_value(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match="line") as err:
        load_suite(write(tmp_path, SUITE.replace(*edit)))
    assert message in str(err.value)


def test_shipped_cpu_suite_parses() -> None:
    spec = load_suite(Path(__file__).parents[1] / "suites" / "convergence.toml")
    assert spec.mode == "convergence" and spec.convergence.stop_at_target
    assert {p.lr_scaling for p in spec.points()} == {"sqrt"}
