"""CIFAR-10 from the standard python-pickle batches in a local folder (no download).

The folder holds `data_batch_1` ... `data_batch_5` and `test_batch` (or a `cifar-10-batches-py`
folder with them), each a pickled dict with b"data" (N x 3072 uint8, channel-major 32x32 images)
and b"labels". Training uses every data batch present; the held-out set is `test_batch`.
Only load folders you trust: the format is Python pickle.
"""

from __future__ import annotations

import functools
import pickle
from pathlib import Path

import numpy as np
import torch

from gpubench.data.dataset import ImageDataSet

FOLDER = "cifar-10-batches-py"
CLASSES = 10


def batch_files(data_dir: str | Path) -> tuple[list[Path], Path]:
    """The training batch files and the test batch file under `data_dir`; a ValueError names
    what is missing (the sweep reports it as a configuration error before writing anything)."""
    root = Path(data_dir)
    if (root / FOLDER).is_dir():
        root = root / FOLDER
    train = sorted(root.glob("data_batch_*"))
    test = root / "test_batch"
    if not train or not test.is_file():
        raise ValueError(
            f"no CIFAR-10 batches in {str(data_dir)!r}; expected data_batch_1..5 and test_batch "
            f"(the python-pickle version), directly or in {FOLDER}/"
        )
    return train, test


def _read(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as f:
        d = pickle.load(f, encoding="bytes")
    data = np.asarray(d[b"data"], dtype=np.uint8)
    labels = np.asarray(d[b"labels"], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ValueError(f"{path}: not a CIFAR-10 batch (data {data.shape}, {len(labels)} labels)")
    return data.reshape(-1, 3, 32, 32), labels


@functools.lru_cache(maxsize=2)
def load(data_dir: str) -> ImageDataSet:
    """CIFAR-10 as uint8 images, normalised per batch with the training set's channel stats."""
    train_files, test_file = batch_files(data_dir)
    parts = [_read(p) for p in train_files]
    train_x = torch.from_numpy(np.concatenate([p[0] for p in parts]))
    train_y = torch.from_numpy(np.concatenate([p[1] for p in parts]))
    ex, ey = _read(test_file)
    scaled = train_x.float()
    return ImageDataSet(
        name="cifar10",
        train_x=train_x,
        train_y=train_y,
        eval_x=torch.from_numpy(ex),
        eval_y=torch.from_numpy(ey),
        mean=scaled.mean(dim=(0, 2, 3)),
        std=scaled.std(dim=(0, 2, 3)),
        classes=CLASSES,
        info={"source": str(Path(data_dir).resolve()), "files": [p.name for p in train_files]},
    )
