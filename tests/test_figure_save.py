"""figure.save checks every shown axis for tick labels after laying the figure out, without a
draw of its own: the check still sees the formatter's labels, and still refuses an axis with
none."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from gpubench.report.figure import log_y, save


def test_a_log_axis_is_labelled_without_a_draw_and_saved(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [0.013, 0.02, 0.031])  # a range inside one decade: minor labels only
    log_y(ax)
    save(fig, tmp_path, "chart.png", "title")
    assert (tmp_path / "chart.png").stat().st_size > 0


def test_an_axis_without_labels_is_refused(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 2, 3])
    ax.set_yticks([])
    with pytest.raises(AssertionError, match="unlabelled"):
        save(fig, tmp_path, "chart.png", "title")
    plt.close(fig)
    assert not (tmp_path / "chart.png").exists()
