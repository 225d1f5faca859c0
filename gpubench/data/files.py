"""Data sets written to disk once, in real formats, for the loader data mode (issue 31): the
digits as encoded PNG files at a model's image shape, and the text corpus as a file of token ids
read by offset. Nothing is downloaded: both come from what gpubench already ships with.

They live in the cache folder (`$GPUBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/gpubench`, else
`~/.cache/gpubench`) under `data/`, one folder per format and shape. A folder is written under a
temporary name and renamed into place, so a process never reads a half-written one and two
points that write it at once both end with the same complete folder."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

# The cache folder's own variable (probes.calibration keeps the matmul peaks there too).
CACHE_ENV = "GPUBENCH_CACHE_DIR"
# Bumped when what a folder holds changes, so an old cache is never read as the new format.
FORMAT_VERSION = 1
META = "meta.json"
TOKENS = "tokens.bin"  # little-endian uint16 token ids


def cache_dir() -> Path:
    """gpubench's cache folder: `$GPUBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/gpubench`, else
    `~/.cache/gpubench`."""
    own = os.environ.get(CACHE_ENV)
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gpubench"


def _written(name: str, write: Callable[[Path], dict[str, object]]) -> Path:
    """The folder `name` in the cache, written by `write(folder)` (which returns its meta)
    unless a complete one is there already."""
    final = cache_dir() / "data" / name
    if (final / META).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=final.parent))
    try:
        meta = write(tmp)
        (tmp / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        try:
            tmp.rename(final)
        except OSError:
            if not (final / META).is_file():  # not another process's complete copy: a failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return final


def image_folder(shape: tuple[int, int, int]) -> Path:
    """The digits' training split as PNG files `NNNNN.png` at `shape` (C, H, W; C 1 or 3) with
    `labels.npy`, and in meta.json the per-channel mean and std of the pixels scaled to [0, 1]."""
    c, h, w = shape
    if c not in (1, 3):
        raise ValueError(f"PNG images have 1 or 3 channels; the model's images have {c}")
    return _written(f"digits-png-{c}x{h}x{w}-v{FORMAT_VERSION}", lambda d: _write_images(d, shape))


def _write_images(folder: Path, shape: tuple[int, int, int]) -> dict[str, object]:
    from PIL import Image

    from gpubench.data import digits

    ds = digits.load(shape)
    pixels = (ds.train_x.clamp(0, 1) * 255).round().byte().numpy()
    mode = "L" if shape[0] == 1 else "RGB"
    for i, image in enumerate(pixels):
        array = image[0] if shape[0] == 1 else image.transpose(1, 2, 0)
        Image.fromarray(np.ascontiguousarray(array), mode=mode).save(folder / f"{i:05d}.png")
    np.save(folder / "labels.npy", ds.train_y.numpy())
    scaled = pixels.astype(np.float32) / 255
    return {
        "source": "sklearn digits (training split)",
        "format": "png",
        "shape": list(shape),
        "count": len(pixels),
        "classes": ds.classes,
        "mean": scaled.mean(axis=(0, 2, 3)).tolist(),
        "std": scaled.std(axis=(0, 2, 3)).tolist(),
    }


def token_file() -> Path:
    """The text corpus's token ids (gpubench.data.text's alphabet) in `tokens.bin`."""
    return _written(f"text-tokens-v{FORMAT_VERSION}", _write_tokens)


def _write_tokens(folder: Path) -> dict[str, object]:
    from gpubench.data import text

    corpus, names = text.corpus()
    ids = text.encode(corpus).astype("<u2")
    ids.tofile(folder / TOKENS)
    return {"source": "python stdlib", "files": len(names), "tokens": len(ids), "vocab": text.VOCAB}


def meta(folder: Path) -> dict[str, object]:
    """What the cached data set in `folder` holds (its META object, as written with it). Not a
    run folder's file: read here, in the data stage, which store/ sits above."""
    with (folder / META).open(encoding="utf-8") as f:
        return dict(json.load(f))
