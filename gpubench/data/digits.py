"""scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes; no download).

The images are scaled to the shape a model takes (the CNN's 3x32x32: bilinear upsampling, the
grey channel repeated), and split once, with a fixed seed, into 80% training and 20% held-out.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from gpubench.data.dataset import ImageDataSet

EVAL_FRACTION = 0.2
SPLIT_SEED = 0
NATIVE_SHAPE = (1, 8, 8)


@functools.lru_cache(maxsize=4)
def load(image_shape: tuple[int, int, int] = NATIVE_SHAPE) -> ImageDataSet:
    """The digits at `image_shape` (C, H, W), C being 1 or 3; pixel values scaled to [0, 1]
    before normalisation with the training split's per-channel mean and standard deviation."""
    c, h, w = image_shape
    if c not in (1, 3):
        raise ValueError(f"digits are grey images; channels must be 1 or 3, got {c}")
    images, target = _raw()
    x = torch.from_numpy(images.astype(np.float32) / 16.0).unsqueeze(1)  # (N, 1, 8, 8)
    if (h, w) != (8, 8):
        x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    x = x.expand(-1, c, -1, -1).contiguous()
    y = torch.from_numpy(target.astype(np.int64))
    order = torch.from_numpy(np.random.default_rng(SPLIT_SEED).permutation(len(y)))
    n_eval = round(len(y) * EVAL_FRACTION)
    train, held_out = order[n_eval:], order[:n_eval]
    mean = x[train].mean(dim=(0, 2, 3))
    std = x[train].std(dim=(0, 2, 3))
    return ImageDataSet(
        name="digits",
        train_x=x[train],
        train_y=y[train],
        eval_x=x[held_out],
        eval_y=y[held_out],
        mean=mean,
        std=std,
        classes=10,
        info={"source": "sklearn.datasets.load_digits", "image_shape": list(image_shape)},
    )


@functools.lru_cache(maxsize=1)
def _raw() -> tuple[np.ndarray, np.ndarray]:
    """The images (N, 8, 8) and labels (N,) as sklearn.datasets.load_digits gives them, read
    from the CSV file scikit-learn ships (as load_digits reads it) without importing
    scikit-learn (seconds of imports: issue 51's noise phase loads the digits within its
    budget); through load_digits where that file is not where it was. Read once a process:
    the arrays are not to be written to."""
    spec = importlib.util.find_spec("sklearn")  # finds the package, imports nothing
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = Path(folders[0], "datasets", "data", "digits.csv.gz") if folders else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        raw = load_digits()
        return raw.images, raw.target
    data = np.loadtxt(path, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int64)
