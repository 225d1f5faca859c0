"""The loader data mode's input pipelines (issue 31): a torch DataLoader over a data set on disk,
its per-sample work (decode, augment, normalise) done in the loader's workers.

gpubench's own pipelines read what gpubench.data.files wrote: image models decode PNG files and
take a random crop (4 pixels of padding), a horizontal flip and a per-channel normalisation (the
MLP: decode and normalise, as a dense model of flattened pixels is trained); sequence models
read windows of token ids from a file by offset. A user's own Dataset or DataLoader enters as a
factory 'package.module:function' called with the workload and the point's LoaderSettings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, RandomSampler

from gpubench.data import files
from gpubench.models.workload import Workload, imported_function

# A worker that delivers no batch for this long is taken as hung: the point ends as an error
# row naming the loader (DataLoader's own timeout), and the sweep goes on.
WORKER_TIMEOUT_S = 120.0
CROP_PADDING = 4


class PngImages(Dataset[tuple[Tensor, int]]):
    """PNG files decoded with Pillow, each sample `(image (C, H, W) float32, label)`;
    `augment`: a random crop of the padded image and a random horizontal flip."""

    def __init__(self, folder: Path, augment: bool) -> None:
        meta = files.meta(folder)
        self.paths = sorted(folder.glob("*.png"))
        self.labels = np.load(folder / "labels.npy")
        self.mean = torch.tensor(meta["mean"]).view(-1, 1, 1)  # type: ignore[arg-type]
        self.std = torch.tensor(meta["std"]).view(-1, 1, 1)  # type: ignore[arg-type]
        self.augment = augment
        if len(self.paths) != len(self.labels):
            raise ValueError(f"{folder}: {len(self.paths)} images but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[Tensor, int]:
        from PIL import Image

        with Image.open(self.paths[i]) as im:
            pixels = np.asarray(im, dtype=np.uint8)
        x = torch.from_numpy(pixels.copy())
        x = x.unsqueeze(0) if x.ndim == 2 else x.permute(2, 0, 1)
        x = x.float().div_(255)
        if self.augment:
            x = _random_crop(x, CROP_PADDING)
            if torch.rand(()) < 0.5:
                x = x.flip(-1)
        return (x - self.mean) / self.std, int(self.labels[i])


def _random_crop(x: Tensor, pad: int) -> Tensor:
    """A crop of `x` (C, H, W) at its own size from it padded by `pad` zeros each side."""
    _, h, w = x.shape
    padded = nn.functional.pad(x, (pad, pad, pad, pad))
    top, left = (int(v) for v in torch.randint(0, 2 * pad + 1, (2,)))
    return padded[:, top : top + h, left : left + w]


class TokenWindows(Dataset[tuple[Tensor, Tensor]]):
    """Windows of `seq_len` + 1 token ids read from a file by offset (each worker opens the file
    itself), as `(inputs, targets)` shifted by one; ids are taken modulo `vocab`."""

    def __init__(self, path: Path, seq_len: int, vocab: int) -> None:
        self.path, self.seq_len, self.vocab = path, seq_len, vocab
        tokens = path.stat().st_size // 2
        self.count = (tokens - 1) // seq_len
        if self.count < 1:
            raise ValueError(f"{path}: {tokens} tokens hold no window of {seq_len + 1}")
        self._file: Any = None

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        if self._file is None:  # opened in the process that reads (a worker), never shared
            self._file = open(self.path, "rb")  # noqa: SIM115 (held for the process's life)
        self._file.seek(2 * i * self.seq_len)
        ids = np.frombuffer(self._file.read(2 * (self.seq_len + 1)), dtype="<u2")
        window = torch.from_numpy(ids.astype(np.int64) % self.vocab)
        return window[:-1], window[1:]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_file": None}


@dataclass(frozen=True)
class LoaderSettings:
    """A point's DataLoader settings, given to a user's factory; `dataloader(dataset)` builds
    the DataLoader gpubench builds for its own data sets with them."""

    batch_size: int
    workers: int
    pin_memory: bool
    prefetch: int | None
    persistent_workers: bool
    seed: int = 0
    timeout_s: float = WORKER_TIMEOUT_S

    def dataloader(self, dataset: Dataset[Any]) -> DataLoader[Any]:
        """Shuffled full batches (drop_last), sampled with replacement where the data set holds
        fewer samples than one batch."""
        g = torch.Generator()
        g.manual_seed(self.seed)
        n = len(dataset)  # type: ignore[arg-type]
        small = n < self.batch_size
        sampler = RandomSampler(
            dataset,  # type: ignore[arg-type]  # a map-style Dataset has a length
            replacement=small,
            num_samples=4 * self.batch_size if small else None,
        )
        sampler.generator = g
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=sampler,
            drop_last=True,
            num_workers=self.workers,
            pin_memory=self.pin_memory,
            prefetch_factor=self.prefetch if self.workers else None,
            persistent_workers=self.persistent_workers and self.workers > 0,
            timeout=self.timeout_s if self.workers else 0,
            generator=g,
        )


def builtin_dataset(workload: Workload) -> tuple[Dataset[Any], str]:
    """gpubench's own on-disk data set for `workload`, and a line naming it: PNG images for a
    model of (N, C, H, W) float images, token windows for one of (N, T) token ids."""
    x, y = workload.batch(2, "cpu", 0)
    if x.is_floating_point() and x.ndim == 4:
        shape = (int(x.shape[1]), int(x.shape[2]), int(x.shape[3]))
        augment = workload.convolutional
        folder = files.image_folder(shape)
        work = "decode, random crop, flip, normalise" if augment else "decode, normalise"
        return PngImages(folder, augment), f"digits PNG {'x'.join(map(str, shape))} ({work})"
    embeddings = [m for m in workload.model.modules() if isinstance(m, nn.Embedding)]
    if not x.is_floating_point() and x.ndim == 2 and y.shape == x.shape and embeddings:
        vocab = embeddings[0].num_embeddings
        path = files.token_file() / files.TOKENS
        return TokenWindows(path, int(x.shape[1]), vocab), f"text tokens by offset (T={x.shape[1]})"
    raise ValueError(
        f"the loader data mode reads images (N, C, H, W) and token windows (N, T); "
        f"{workload.name} takes inputs {tuple(x.shape)} {x.dtype}: give a Dataset factory "
        "(loader = 'package.module:function')"
    )


def build_loader(
    workload: Workload, settings: LoaderSettings, loader: str | None = None
) -> tuple[DataLoader[Any], str]:
    """The DataLoader a point trains from, and a line naming its data: gpubench's own for the
    workload, or what the factory `loader` returns (a Dataset is loaded with `settings`; a
    DataLoader is used as it is)."""
    if loader is None:
        dataset, what = builtin_dataset(workload)
        return settings.dataloader(dataset), what
    made = imported_function(loader, "loader")(workload, settings)
    if isinstance(made, DataLoader):
        return made, f"{loader} (its own DataLoader)"
    if isinstance(made, Dataset):
        return settings.dataloader(made), loader
    raise ValueError(
        f"loader {loader!r} returned {type(made).__name__}, not a Dataset or DataLoader"
    )
