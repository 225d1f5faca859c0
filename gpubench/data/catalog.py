"""Which real data set each reference model trains on in a convergence run, and how the model's
configuration is adapted to it (input shape, classes, vocabulary)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the data modules bring torch: imported when a data set is loaded
    from gpubench.data.dataset import DataSet

DATASETS = ("digits", "cifar10", "text")
TASKS = {"digits": "classification", "cifar10": "classification", "text": "language-model"}
MODEL_TASKS = {"mlp": "classification", "cnn": "classification", "transformer": "language-model"}
DEFAULT_DATASET = {"mlp": "digits", "cnn": "digits", "transformer": "text"}

# The default quality target of each data set: (metric, value). Accuracy is a held-out fraction
# (reached when at or above); loss is held-out cross-entropy in nats per sample or token
# (reached when at or below).
DEFAULT_TARGET: dict[str, tuple[str, float]] = {
    "digits": ("eval_accuracy", 0.95),
    "cifar10": ("eval_accuracy", 0.6),
    "text": ("eval_loss", 2.5),
}


def resolve(model: str, dataset: str) -> str:
    """The data set a model trains on: `dataset`, or its default where that is `auto`."""
    if dataset != "auto":
        return dataset
    if model not in DEFAULT_DATASET:
        raise ValueError(
            f"model {model!r} has no default data set; convergence runs take the reference "
            f"models {', '.join(DEFAULT_DATASET)}"
        )
    return DEFAULT_DATASET[model]


def load(
    model: str, size: str, dataset: str, data_dir: str | None, image_size: int | None = None
) -> tuple[DataSet, dict[str, Any]]:
    """The data set for `model` at preset `size`, and the model overrides that fit it. Images
    are `image_size` pixels square where that is set; else the MLP takes the digits at their
    native 8x8 and the CNN at its own input size."""
    from gpubench.data import cifar, digits, text
    from gpubench.models import cnn, transformer

    name = resolve(model, dataset)
    if model not in MODEL_TASKS or MODEL_TASKS[model] != TASKS[name]:
        raise ValueError(f"model {model!r} cannot train on data set {name!r}")
    if name == "text":
        seq_len = transformer.PRESETS[size].seq_len
        return text.load(seq_len), {"vocab": text.VOCAB}
    if name == "digits":
        c, h, w = digits.NATIVE_SHAPE if model == "mlp" else cnn.PRESETS[size].image_shape
        if image_size is not None:
            h = w = image_size
        ds = digits.load((c, h, w))
    else:
        if data_dir is None:
            raise ValueError("the cifar10 data set needs --data-dir (or data_dir in the suite)")
        if image_size not in (None, 32):
            raise ValueError(f"cifar10 images are 32x32; image_size {image_size} is not")
        ds = cifar.load(str(data_dir))
    return ds, {"image_shape": ds.image_shape(), "classes": ds.classes}
