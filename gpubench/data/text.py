"""A character-level corpus from the Python standard library's own source files (no download).

The files are the top-level `*.py` files of this interpreter's standard library, in sorted
order, concatenated (each followed by a newline) until `max_chars` characters. The first 90% is
for training and the last 10% is held out. Characters map to a fixed 98-symbol vocabulary: tab,
newline and printable ASCII, plus one symbol for everything else. The corpus differs between
Python versions, so its sha256 is recorded with each result.
"""

from __future__ import annotations

import functools
import sysconfig
from pathlib import Path

import numpy as np
import torch

from gpubench.data.dataset import TextDataSet

ALPHABET = "\t\n" + "".join(chr(c) for c in range(32, 127))
UNKNOWN = len(ALPHABET)
VOCAB = len(ALPHABET) + 1
EVAL_FRACTION = 0.1
MAX_CHARS = 1_000_000

_TABLE = np.full(128, UNKNOWN, dtype=np.int64)
for _i, _ch in enumerate(ALPHABET):
    _TABLE[ord(_ch)] = _i


def source_files() -> list[Path]:
    """The standard library's top-level modules, sorted by name."""
    return sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))


def encode(text: str) -> np.ndarray:
    """Token ids (int64) of `text`: its characters' indices in ALPHABET, or UNKNOWN."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    ids = np.full(len(codes), UNKNOWN, dtype=np.int64)
    ascii_ = codes < 128
    ids[ascii_] = _TABLE[codes[ascii_]]
    return ids


def corpus(max_chars: int = MAX_CHARS) -> tuple[str, list[str]]:
    """The corpus text (at most `max_chars` characters) and the names of the files in it."""
    parts: list[str] = []
    names: list[str] = []
    total = 0
    for path in source_files():
        if total >= max_chars:
            break
        text = path.read_text(encoding="utf-8", errors="replace") + "\n"
        parts.append(text)
        names.append(path.name)
        total += len(text)
    if not parts:
        where = sysconfig.get_paths()["stdlib"]
        raise RuntimeError(f"no standard-library sources found in {where}")
    return "".join(parts)[:max_chars], names


@functools.lru_cache(maxsize=4)
def load(seq_len: int, max_chars: int = MAX_CHARS) -> TextDataSet:
    """The corpus as a token stream with windows of `seq_len` tokens."""
    text, names = corpus(max_chars)
    ids = torch.from_numpy(encode(text))
    n_train = round(len(ids) * (1 - EVAL_FRACTION))
    return TextDataSet(
        name="text",
        train_tokens=ids[:n_train],
        eval_tokens=ids[n_train:],
        vocab=VOCAB,
        seq_len=seq_len,
        info={"source": "python stdlib", "files": len(names), "chars": len(text)},
    )
