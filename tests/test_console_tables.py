"""What the printed tables say where a cell would otherwise be blank or misleading: a missing CI,
a user's model, a busy or missed point, columns with nothing in them, and the help text."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from rich.console import Console

from gpubench.cli import main, results_table
from gpubench.cli.convergence_table import points_table
from gpubench.config.spec import Point
from gpubench.store.row import make_row

CPU = Point("mlp", "small", "cpu", "fp32", "sgd", 4)


def _ok(point: Point = CPU, **values: object) -> dict[str, object]:
    base = dict(step_time_s=0.004, samples_per_s=1000.0, steps_measured=40, loss_first=2.3)
    base |= dict(loss_last=1.9, step_time_ci_rel=0.01)
    return make_row(point, "ok", **(base | values))


def _text(table: object) -> str:
    c = Console(width=250, record=True)
    c.print(table)
    return c.export_text()


def test_a_blank_ci_says_too_few_steps() -> None:
    few = _ok(steps_measured=4, step_time_ci_rel=None)
    assert results_table._ci_cell(few) == "n<6"
    assert results_table._ci_cell(_ok()) == "1.0%"
    assert results_table._ci_cell(make_row(CPU, "oom", error="x")) == ""


def test_user_models_are_labelled_by_their_function_and_workload_name() -> None:
    user = Point("mynets.cnn:small_cnn", "small", "cpu", "fp32", "sgd", 8)
    assert (
        results_table.model_cell(_ok(user, workload="SmallCNN"))
        == "mynets.cnn:small_cnn (SmallCNN)"
    )
    assert results_table.model_cell(_ok(workload="mlp")) == "mlp/small"
    assert user.label() == "mynets.cnn:small_cnn cpu fp32 sgd B=8"


def test_busy_and_noisy_points_say_so() -> None:
    assert results_table._status_cell(_ok(noisy=True, busy=True)) == "ok (noisy, busy)"
    assert results_table._status_cell(_ok(busy=False)) == "ok"


def test_columns_empty_in_every_row_are_left_out() -> None:
    text = _text(results_table.summary_table(pd.DataFrame([_ok(), _ok(batch_size=16)])))
    assert "options" not in text
    assert "synthetic loss first→last" in text and "not how well the model learns" in text
    threaded = _ok(Point("mlp", "small", "cpu", "fp32", "sgd", 4, threads=1))
    assert "1 thread" in _text(results_table.summary_table(pd.DataFrame([_ok(), threaded])))


def test_a_convergence_point_that_missed_its_target_says_so() -> None:
    point = Point("mlp", "tiny", "cpu", "fp32", "adamw", 32, lr_scaling="sqrt")
    missed = make_row(point, "ok", target=0.9, target_metric="accuracy", steps_to_target=None)
    reached = make_row(point, "ok", target=0.9, target_metric="accuracy", steps_to_target=120)
    text = _text(points_table(pd.DataFrame([missed, reached])))
    assert text.count("missed target 0.9") == 1


def test_sweep_help_lists_the_allowed_values(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for allowed in (
        "mlp, cnn, transformer; or from a library: torchvision:NAME, timm:NAME (a torchvision "
        "built for your torch: see the README), hf:MODEL_TYPE (extra hf); or your own: "
        "package.module:function",
        "the size preset: tiny, small, base (default: the suite's)",
        "--steps STEPS measure exactly this many steps per point, with no adaptive stopping "
        "(default: the suite's)",
        "(default: 600)",
        "e.g. --option transformer.layers=4",
        "convergence, convergence_accumulate, convergence_gpu, gpu, loader, quick, scaling "
        "(default: quick",
        "fp32, tf32, fp16, bf16",
        "sgd, adam, adamw",
        "auto (the CPU, plus CUDA where present), cpu, cuda, cuda:N",
    ):
        assert allowed in text


def test_max_batch_help_shows_each_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["max-batch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in (
        "hf:MODEL_TYPE (extra hf)",
        "tiny, small, base (default: small)",
        "cuda:N (default: auto)",
        "sgd, adam, adamw (default: adamw)",
        "first batch size (default: 1)",
        "e.g. --option transformer.layers=4",
    ):
        assert shown in text
    assert "(default: None)" not in text and "(default: [])" not in text


def _quick_like_rows() -> pd.DataFrame:
    """A quick-suite-like sweep on the CPU: two models, two precisions and optimizers, two
    batch sizes, a failed point with a long message."""
    rows = []
    for model in ("mlp", "transformer"):
        for precision in ("fp32", "bf16"):
            for optimizer in ("sgd", "adamw"):
                for b in (16, 256):
                    point = Point(model, "small", "cpu", precision, optimizer, b)
                    if precision == "bf16" and b == 256:
                        error = "RuntimeError: boom-4711 in the forward of the model, and more"
                        rows.append(make_row(point, "error", error=error))
                    else:
                        rows.append(_ok(point, samples_per_s=12345.0, loss_first=2.303))
    return pd.DataFrame(rows)


def _printed(frame: pd.DataFrame, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width).print(results_table.summary_table(frame, width=width))
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 120])
def test_the_results_table_fits_the_terminal_with_names_whole(width: int) -> None:
    frame = _quick_like_rows()
    text = _printed(frame, width)
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines())
    rows = [line for line in text.splitlines() if line.startswith("│ ") and "/small" in line]
    assert len(rows) == len(frame)  # each row's first line names its model, whole
    assert sum("│ transformer/small " in line for line in rows) == len(frame) // 2
    for whole in ("ok", "error:", "RuntimeError:", "bf16", "adamw", "4.00", "256"):
        assert whole in text


def test_a_narrow_table_gives_up_columns_in_the_stated_order() -> None:
    frame = _quick_like_rows()
    assert results_table.DROPPED_FIRST == (
        "synthetic loss first→last",
        "samples/s",
        "efficiency",
        "±CI",
    )
    wide, medium, narrow = (_printed(frame, w) for w in (160, 120, 80))
    header = next(line for line in wide.splitlines() if "model" in line)
    for full in ("device", "precision", "optimizer", "samples/s", "synthetic loss first→last"):
        assert full in header
    header = next(line for line in medium.splitlines() if "model" in line)
    assert "prec " in header and "optim " in header and "loss" in header  # short headers
    assert "loss: the training loss at the first and last step" in medium
    header = next(line for line in narrow.splitlines() if "model" in line)
    assert "every row: device cpu" in narrow and "device" not in header  # said once
    assert "loss" not in header and "samples/s" not in header and "±CI" in header
    assert "the training loss" not in narrow  # no caption for a column not shown


def test_a_table_too_wide_for_any_fit_folds_names_rather_than_cutting_them() -> None:
    name = "a_rather_long_package.of_models:a_function_name_that_is_long"
    frame = pd.DataFrame([_ok(Point(name, "small", "cpu", "fp32", "sgd", 4)), _ok()])
    text = _printed(frame, 50)
    assert "…" not in text
    assert "a_function_name_that_is_long" in "".join(
        line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")
    )
