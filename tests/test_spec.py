from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.config.validate import validate


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(text)
    return path


GOOD = """
name = "t"
models = ["mlp", "cnn"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [2, 4]
precisions = ["fp32", "bf16"]
optimizers = ["sgd"]

[budget]
max_time_s = 0.5
"""


def test_suite_expands_to_the_product_of_its_axes(tmp_path: Path) -> None:
    spec = load_suite(write(tmp_path, GOOD))
    points = spec.points()
    assert len(points) == 2 * 1 * 2 * 1 * 2
    assert len(set(points)) == len(points)
    assert points[0] == Point("mlp", "tiny", "cpu", "fp32", "sgd", 2)
    assert spec.budget.max_time_s == 0.5
    assert spec.budget.min_steps == Budget().min_steps


@pytest.mark.parametrize("cuda", [False, True])
def test_auto_device_is_the_cpu_plus_cuda_where_present(
    cuda: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)  # both hosts, on any machine
    spec = SweepSpec(name="x", models=("mlp",), devices=("auto", "cpu"))
    assert spec.resolved_devices() == (("cpu", "cuda") if cuda else ("cpu",))


def test_user_model_key_is_accepted(tmp_path: Path) -> None:
    spec = load_suite(write(tmp_path, 'model = "mypkg.workloads:build"\n'))
    assert spec.models == ("mypkg.workloads:build",)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('models = ["resnet"]', "unknown model 'resnet'"),
        ('models = ["mlp"]\nsize = "huge"', "unknown size 'huge'"),
        ('models = ["mlp"]\ndevices = ["tpu"]', "unknown device 'tpu'"),
        ('models = ["mlp"]\nprecisions = ["fp8"]', "unknown precision 'fp8'"),
        ('models = ["mlp"]\noptimizers = ["lion"]', "unknown optimizer 'lion'"),
        ('models = ["mlp"]\nbatch_sizes = [0]', "invalid batch size 0"),
        ('models = ["mlp"]\nbatch_sizes = [-4]', "invalid batch size -4"),
        ('models = ["mlp"]\nbatch_sizes = [2.5]', "invalid batch size 2.5"),
        ('models = ["mlp"]\nbatch_sizes = ["big"]', "invalid batch size 'big'"),
        ('models = ["mlp"]\nbatch_sizes = []', "non-empty list"),
        ('models = ["mlp"]\nbatchsize = [4]', "unknown key 'batchsize'"),
        ('models = ["mlp"]\n[budget]\nmax_time = 3', "unknown key budget.'max_time'"),
        ('models = ["mlp"]\n[budget]\ndeadline = 3', "unknown key budget.'deadline'"),
        ('models = ["mlp"]\n[budget]\nmin_steps = 0', "min_steps"),
        ('name = "x"', "no models"),
    ],
)
def test_bad_suites_name_the_value_and_what_is_allowed(
    tmp_path: Path, text: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_suite(write(tmp_path, text))
    message = str(info.value)
    assert fragment in message
    assert str(tmp_path) in message
    assert "\n" not in message


def test_unknown_key_error_gives_its_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 3: unknown key 'batchsize'"):
        load_suite(write(tmp_path, 'name = "x"\nmodels = ["mlp"]\nbatchsize = [4]\n'))


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 2: malformed TOML: "):
        load_suite(write(tmp_path, 'models = ["mlp"]\nsize = \n'))


def test_cuda_on_a_machine_without_one_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a GPU host too
    with pytest.raises(ConfigError, match="no CUDA device"):
        validate(SweepSpec(name="x", models=("mlp",), devices=("cuda",)))


def test_shipped_suites_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    # each as on a host with one GPU, on any machine: the CUDA suites are checked here too
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    suites = Path(__file__).parent.parent / "gpubench" / "suites"
    names = sorted(p.stem for p in suites.glob("*.toml"))
    assert "quick" in names and "gpu" in names
    for path in suites.glob("*.toml"):
        load_suite(path)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('name = "x"\nmodels = ["mlp"\nsize = "tiny"\n', 2),  # tomllib says line 3
        ('name = "x"\nmodels = ["mlp"\n', 2),  # tomllib says: at end of document
        ('name = "x"\nmodels = [\n  "mlp",\n  "cnn"\nsize = "tiny"\n', 2),
        ('name = "x"  # [ in a comment\nbudget = { min_steps = 3\nsize = "tiny"\n', 2),
        ('name = "[x"\nseeds = [0, 1]\nmodels = ["m]lp"\nsize = "tiny"\n', 3),
        ('name = "x"\nmodels = [mlp]\n', 2),
    ],
)
def test_malformed_toml_is_reported_at_the_line_of_the_mistake(
    tmp_path: Path, text: str, line: int
) -> None:
    with pytest.raises(ConfigError, match=rf"suite\.toml, line {line}: malformed TOML: "):
        load_suite(write(tmp_path, text))
