"""Models by name from torchvision, timm and Hugging Face transformers, their options, the
missing-extra error, the edge check that builds every model before a sweep writes anything, the
cudnn_benchmark option and the precision note (issue 16)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gpubench import models
from gpubench.cli import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.harness.step import unsupported_reason
from gpubench.run.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent
TORCH = importlib.metadata.version("torch")  # as pip knows it: PyPI's builds have no "+cu130"
HF_SUITE = """
models = ["hf:gpt2"]
devices = ["cpu"]
batch_sizes = [2]
[model_options."hf:gpt2"]
n_layer = 1
n_embd = 32
n_head = 2
vocab_size = 128
seq_len = 16
[budget]
min_steps = 2
max_steps = 2
warmup_steps = 1
min_time_s = 0
warmup_min_s = 0
"""


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def test_hf_model_sweeps_with_its_options(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    suite = tmp_path / "hf.toml"
    suite.write_text(HF_SUITE)
    spec = load_suite(suite)
    frame = run_sweep(spec, tmp_path / "run")
    (row,) = frame.to_dict("records")
    assert row["status"] == "ok", row["error"]
    assert json.loads(row["model_options"])["n_layer"] == 1
    assert row["tokens_per_step"] == 2 * 16 and row["tokens_per_s"] > 0
    # the analytic count agrees with the dispatched FLOPs (optimizer and elementwise aside)
    assert 0.8 < row["flops_analytic_per_step"] / row["flops_per_step"] < 1.25
    assert unsupported_reason(
        Point("hf:gpt2", "small", "cpu", "fp32", "sgd", 2, channels_last=True),
        models.build("hf:gpt2", n_layer=1, n_embd=32, n_head=2),
    )


def test_an_option_the_model_lacks_is_exit_2_naming_the_ones_it_has(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    suite = tmp_path / "bad.toml"
    suite.write_text(HF_SUITE.replace("n_layer = 1", "n_layers = 1"))
    with pytest.raises(ConfigError, match=r"no option 'n_layers'; allowed: .*n_layer.*seq_len"):
        run_sweep(load_suite(suite), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="no model 'gtp2'; nearest: gpt2"):
        models.build("hf:gtp2")


def test_reference_models_take_options_too() -> None:
    w = models.build("cnn", "tiny", num_classes=3, image_size=16, widths=[4, 8])
    x, y = w.batch(2, "cpu")
    assert x.shape == (2, 3, 16, 16) and w.model(x).shape == (2, 3) and int(y.max()) < 3
    with pytest.raises(ValueError, match=r"no option 'seq_len'; allowed: blocks, classes"):
        models.build("cnn", "tiny", seq_len=8)


def test_model_options_must_name_a_model_of_the_suite(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text('models = ["mlp"]\n[model_options."cnn"]\nwidths = [4]\n')
    with pytest.raises(ConfigError, match=r"line 2: model_options names 'cnn', not in models"):
        load_suite(suite)


def _absent(monkeypatch: pytest.MonkeyPatch, *libraries: str) -> None:
    """Make `libraries` not installed for this test, as import and find_spec see them."""
    for library in libraries:
        for key in [k for k in sys.modules if k.partition(".")[0] == library] or [library]:
            monkeypatch.setitem(sys.modules, key, None)


def _pip_for_this_torch() -> str:
    """The start of the install command gpubench names for the running torch."""
    public, _, label = TORCH.partition("+")
    index = f" --index-url https://download.pytorch.org/whl/{label}" if label else ""
    return f"pip install torch=={public} torchvision{index}"


@pytest.mark.parametrize(
    ("name", "needs"),
    [
        ("torchvision:resnet18", "torchvision, which is"),
        ("timm:resnet18", "timm and torchvision, which are"),
    ],
)
def test_a_missing_library_names_the_install_that_keeps_this_torch(
    monkeypatch: pytest.MonkeyPatch, name: str, needs: str
) -> None:
    _absent(monkeypatch, "torchvision", "timm")
    with pytest.raises(ValueError) as raised:
        models.build(name)
    message = str(raised.value)
    fix = _pip_for_this_torch() + (" && pip install timm" if name.startswith("timm") else "")
    assert message == (
        f"model {name!r} needs {needs} not installed; install the torchvision built for "
        f"torch {TORCH} with: {fix}"
    )


def test_timm_missing_beside_a_working_torchvision_is_a_plain_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("torchvision")
    _absent(monkeypatch, "timm")
    with pytest.raises(
        ValueError, match=r"needs timm, which is not installed; .*: pip install timm$"
    ):
        models.build("timm:resnet18")


def test_the_install_command_keeps_the_torch_release_and_its_index() -> None:
    from gpubench.models.library_import import install_command

    cpu = "https://download.pytorch.org/whl/cpu"
    assert (
        install_command("2.13.0+cpu") == f"pip install torch==2.13.0 torchvision --index-url {cpu}"
    )
    assert install_command("2.14.1") == "pip install torch==2.14.1 torchvision"
    assert install_command("2.6.0+cu126", replace=True, with_timm=True) == (
        "pip uninstall -y torchvision && pip install torch==2.6.0 torchvision "
        "--index-url https://download.pytorch.org/whl/cu126 && pip install timm"
    )
    assert install_command("2.8.0+rocm6.3").endswith(
        "--index-url https://download.pytorch.org/whl/rocm6.3"
    )
    # a torch built from source: pinned whole, so pip cannot replace it
    assert (
        install_command("2.6.0a0+git1a2b3c") == "pip install torch==2.6.0a0+git1a2b3c torchvision"
    )


def _broken_torchvision(folder: Path) -> Path:
    """A torchvision built for torch 2.14.1 that fails at import as one built for another torch
    does (its C++ operators do not load), with the package metadata pip would have written."""
    (folder / "torchvision").mkdir(parents=True)
    (folder / "torchvision" / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n'
    )
    (folder / "torchvision-0.29.1.dist-info").mkdir()
    (folder / "torchvision-0.29.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.29.1\nRequires-Dist: numpy\n"
        "Requires-Dist: torch (==2.14.1)\nRequires-Dist: pillow (!=8.3.*,>=5.3.0)\n"
    )
    return folder


BUILD_EACH = """
import json, sys
from gpubench import models
for name in sys.argv[1:]:
    try:
        models.build(name)
        print(json.dumps([name, None]))
    except Exception as e:
        print(json.dumps([name, f"{type(e).__name__}: {e}"]))
"""


def test_a_torchvision_built_for_another_torch_is_named_with_the_fix(tmp_path: Path) -> None:
    fake = _broken_torchvision(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}
    names = ["torchvision:resnet18", "timm:resnet18", "hf:gpt2"]
    done = subprocess.run(
        [sys.executable, "-c", BUILD_EACH, *names],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    errors = dict(json.loads(line) for line in done.stdout.splitlines())
    said = (
        f"torch {TORCH} is installed ({_build(TORCH)}), and "
        "torchvision 0.29.1 is built for torch==2.14.1 (the default build from PyPI); "
        "install the torchvision built for this torch with: pip uninstall -y torchvision && "
        + _pip_for_this_torch()
    )
    cause = "which does not import (RuntimeError: operator torchvision::nms does not exist): "
    assert errors["torchvision:resnet18"] == (
        f"ValueError: model 'torchvision:resnet18' needs torchvision, {cause}{said}"
    )
    timm_fix = "" if _installed("timm") else " && pip install timm"
    assert errors["timm:resnet18"] == (
        f"ValueError: model 'timm:resnet18' needs torchvision (imported by timm), {cause}{said}"
        + timm_fix
    )
    # transformers imports an installed torchvision and then says only that GPT2LMHeadModel
    # "could not be imported": where it fails, the error names torchvision instead
    hf = errors["hf:gpt2"]
    if _installed("transformers") and hf is not None:
        through = "needs torchvision (imported by transformers), "
        assert hf == f"ValueError: model 'hf:gpt2' {through}{cause}{said}"
    # the command line: exit 2, that one line, nothing written
    suite = tmp_path / "tv.toml"
    suite.write_text('models = ["torchvision:resnet18"]\ndevices = ["cpu"]\nbatch_sizes = [2]\n')
    argv = [sys.executable, "-m", "gpubench", "sweep", str(suite), "--out", str(tmp_path / "run")]
    cli = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 2, cli.stderr
    assert cli.stderr.strip() == f"gpubench: error: {errors['torchvision:resnet18'][12:]}"
    assert not (tmp_path / "run").exists()


def _build(version: str) -> str:
    label = version.partition("+")[2]
    return f"the +{label} build" if label else "the default build from PyPI"


def test_no_extra_names_a_package_that_drags_torch() -> None:
    """pip replaces the installed torch to satisfy any torchvision requirement (torchvision pins
    its torch), and timm requires torchvision: the extras name none of them."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, requirements in extras.items():
        for requirement in requirements:
            project = re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower()
            assert project not in {"torch", "torchvision", "timm"}, (extra, requirement)


def test_the_require_ecosystem_switch_turns_an_import_skip_into_a_failure(
    tmp_path: Path,
) -> None:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_needs.py").write_text(
        "import pytest\n\ndef test_needs():\n    pytest.importorskip('no_such_library_4711')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUBENCH_REQUIRE_ECOSYSTEM": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert "1 failed" in done.stdout
    assert "GPUBENCH_REQUIRE_ECOSYSTEM=1, and this test skipped: could not import" in done.stdout


def test_torchvision_model_at_a_tiny_size() -> None:
    pytest.importorskip("torchvision")
    w = models.build("torchvision:resnet18", num_classes=3, image_size=32)
    x, y = w.batch(2, "cpu")
    assert x.shape == (2, 3, 32, 32) and w.model(x).shape == (2, 3)
    assert w.loss(w.model(x), y).ndim == 0
    assert (
        models.build("torchvision:inception_v3", init_weights=False).batch(1, "cpu")[0].shape[-1]
        == 299
    )
    with pytest.raises(ValueError, match="nearest: resnet18"):
        models.build("torchvision:resnet19")


def test_timm_model_at_a_tiny_size() -> None:
    pytest.importorskip("timm")
    w = models.build("timm:resnet18", num_classes=3, image_size=32)
    x, _ = w.batch(2, "cpu")
    assert x.shape == (2, 3, 32, 32) and w.model(x).shape == (2, 3)
    vit = models.build("timm:vit_tiny_patch16_224", num_classes=5, image_size=32)
    assert vit.model(vit.batch(1, "cpu")[0]).shape == (1, 5)


def test_cudnn_benchmark_is_an_axis_recorded_in_the_row_and_unsupported_on_the_cpu() -> None:
    spec = SweepSpec(
        "s", ("cnn",), devices=("cpu",), batch_sizes=(2,), cudnn_benchmark=(False, True)
    )
    points = spec.points()
    assert [p.cudnn_benchmark for p in points] == [False, True]
    assert unsupported_reason(points[0]) is None
    assert "the CPU has no cuDNN" in (unsupported_reason(points[1]) or "")


def test_list_shows_the_precision_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "fp32 is strict IEEE fp32" in out and "hf:MODEL_TYPE" in out


@pytest.mark.slow  # the console script's sweep
def test_console_script_finds_a_module_in_the_current_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = shutil.which("gpubench")
    if script is None:
        pytest.skip("the gpubench console script is not installed")
    (tmp_path / "mycnn.py").write_text(
        "from gpubench import models\n\ndef small_cnn():\n    return models.build('cnn', 'tiny')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's gpubench, not the cwd
    common = ["--devices", "cpu", "--batch-sizes", "2", "--precisions", "fp32", "--optimizers"]
    # no confirmation, no report: what is checked is that the model is found, and the row
    common += ["sgd", "--steps", "1", "--no-profile", "--no-confirm", "--no-report", "--quiet"]

    def sweep(model: str, out: str) -> list[str]:
        return ["sweep", "--models", model, *common, "--out", out]

    ok = subprocess.run(
        [script, *sweep("mycnn:small_cnn", "good")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "good" / "results.jsonl").open()]
    assert row["status"] == "ok", row["error"]
    # A model that is not there is refused at the edge, in one line, before anything is
    # written: the same whether the console script or main() parses the command line, so here
    # (issue 49: two console-script processes, each importing torch, took seconds each). The
    # folder goes on sys.path as the console script puts it (config.user_code): both restored.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "mycnn", raising=False)
    for bad, says in [("mycnn:nope", "has no attribute 'nope'"), ("nomodule:f", "No module named")]:
        assert main(sweep(bad, "bad")) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "bad").exists()
    sys.modules.pop("mycnn", None)  # this folder's module, not another test's


def test_max_batch_takes_model_options(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    argv = ["max-batch", "--model", "hf:gpt2", "--device", "cpu", "--max-memory", "8G"]
    options = ["n_layer=1", "n_embd=32", "n_head=2", "vocab_size=128", "seq_len=16"]
    argv += [f"--option=hf:gpt2.{o}" for o in options] + [
        "--ceiling",
        "4",
        "--steps",
        "2",
        "--json",
    ]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert json.loads(result["model_options"]) == {
        "n_layer": 1,
        "n_embd": 32,
        "n_head": 2,
        "vocab_size": 128,
        "seq_len": 16,
    }
    assert result["largest_batch"] == 4 and result["ceiling_reached"]
    # the probes estimated a sample from the tokens' activations (seq_len 16)
    assert all(p["sample_bytes"] > 0 for p in result["probes"] if p["status"] == "ok")
    bad = ["max-batch", "--model", "hf:gpt2", "--device", "cpu", "--option", "hf:gpt2.n_layers=1"]
    assert main(bad) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "no option 'n_layers'; allowed: " in err and "n_layer" in err
    assert main([*bad[:-1], "n_layer"]) == 2
    assert "invalid model option 'n_layer'; allowed: MODEL.KEY=VALUE" in capsys.readouterr().err


def test_a_model_option_on_the_command_line_reads_as_in_a_suite() -> None:
    from gpubench.cli.values import model_option

    assert model_option("hf:gpt2.n_layer=2") == ("hf:gpt2", "n_layer", 2)
    assert model_option("hf:gpt2.resid_pdrop=0.0") == ("hf:gpt2", "resid_pdrop", 0.0)
    assert model_option("mlp.widths=[4, 8]") == ("mlp", "widths", [4, 8])
    assert model_option("x.scale_attn_weights=false") == ("x", "scale_attn_weights", False)
    assert model_option("x.activation_function=gelu_new") == (
        "x",
        "activation_function",
        "gelu_new",
    )
    assert model_option('x.activation_function="relu"') == ("x", "activation_function", "relu")
    assert model_option("n_layer=2") == (None, "n_layer", 2)  # the old form: no model
    for bad in ("n_layer", "=2", "n layer=2", "n_layer=", "x.n_layer", ".n_layer=2"):
        with pytest.raises(ConfigError, match=r"allowed: MODEL\.KEY=VALUE"):
            model_option(bad)
