from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.config.suite import load_suite, target_settings

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
        (("max_steps = 100", "own_input_target = 0.5"), "own_input_target is set without"),
        (
            ("max_steps = 100", "image_size = 8\nown_input_target = { cnn = 0.5 }"),
            "convergence.own_input_target names cnn, not in models",
        ),
        (
            ("max_steps = 100", "image_size = 8\nown_input_target = { mlp = 0 }"),
            "invalid convergence.own_input_target.mlp 0",
        ),
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


@pytest.mark.parametrize(
    ("target", "own", "expected"),
    [
        # a table over a table: the own-input entries replace the suite's for their models
        ("{ mlp = 0.9, transformer = 3.0 }", "{ mlp = 0.5 }", {"mlp": 0.5, "transformer": 3.0}),
        # a table over one number: the number still holds for the models the table leaves out
        ("1.5", "{ mlp = 0.5 }", {"mlp": 0.5, "transformer": 1.5, "cnn": 1.5}),
        # one number over a table: every model
        ("{ mlp = 0.9 }", "0.5", {"mlp": 0.5, "transformer": 0.5}),
    ],
)
def test_own_input_target_replaces_the_resized_one(
    tmp_path: Path, target: str, own: str, expected: dict[str, float]
) -> None:
    text = SUITE.replace("{ mlp = 0.9, transformer = 3.0 }", target).replace(
        "max_steps = 100", f"max_steps = 100\nimage_size = 8\nown_input_target = {own}"
    )
    conv = load_suite(write(tmp_path, text)).convergence
    assert conv.image_size == 8 and conv.target_for("mlp") != 0.5  # the suite's own runs
    own_input = conv.at_own_input()
    assert own_input.image_size is None and own_input.own_input_target is None
    assert {m: own_input.target_for(m) for m in expected} == expected


def test_own_input_settings_without_an_own_input_target_keep_the_target(tmp_path: Path) -> None:
    conv = load_suite(write(tmp_path, SUITE)).convergence
    assert conv.at_own_input().target == conv.target


def test_the_speed_sweeps_cnn_target_is_its_own_inputs() -> None:
    # the noise phase and --confirm-target train the CNN at 32x32 (issue 51)
    conv = target_settings("adamw")
    suite = load_suite(Path(__file__).parents[1] / "suites" / "convergence.toml").convergence
    assert conv.image_size is None and suite.image_size == 8
    assert isinstance(suite.own_input_target, tuple)
    assert conv.target_for("cnn") == dict(suite.own_input_target)["cnn"]
    assert conv.target_for("cnn") != suite.target_for("cnn")
    assert conv.target_for("mlp") == suite.target_for("mlp")
    assert conv.target_for("transformer") == suite.target_for("transformer")
