from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from gpubench.data import catalog, cifar, digits, text

CPU = torch.device("cpu")


def test_digits_split_is_fixed_disjoint_and_scaled_to_the_cnn_input() -> None:
    native = digits.load((1, 8, 8))
    big = digits.load((3, 32, 32))
    assert (native.train_size, native.eval_size) == (1438, 359)
    assert big.train_x.shape == (1438, 3, 32, 32) and big.eval_x.shape == (359, 3, 32, 32)
    assert torch.equal(native.train_y, big.train_y)  # the same split at every size
    assert set(native.train_y.tolist()) == set(range(10))
    x, y = next(native.train_batches(64, CPU, seed=0))
    assert x.shape == (64, 1, 8, 8) and y.shape == (64,)
    # normalised with the training split's statistics
    all_x = native._normalise(native.train_x)
    assert abs(float(all_x.mean())) < 1e-4 and float(all_x.std()) == pytest.approx(1, abs=1e-3)


def test_the_digits_read_without_sklearn_are_load_digits() -> None:
    # issue 51: read from scikit-learn's CSV file without importing it (seconds of imports)
    from sklearn.datasets import load_digits

    images, target = digits._raw()
    raw = load_digits()
    assert np.array_equal(images, raw.images) and np.array_equal(target, raw.target)


def test_shuffled_batches_cover_an_epoch_and_repeat_with_the_seed() -> None:
    ds = digits.load((1, 8, 8))
    n = ds.train_size // 100
    it = ds.train_batches(100, CPU, seed=3)
    epoch = [next(it)[1] for _ in range(n)]
    counts = torch.bincount(torch.cat(epoch), minlength=10)
    assert int(counts.sum()) == 100 * n and bool((counts <= torch.bincount(ds.train_y)).all())
    again = ds.train_batches(100, CPU, seed=3)
    assert all(torch.equal(y, next(again)[1]) for y in epoch)
    assert not torch.equal(epoch[0], next(ds.train_batches(100, CPU, seed=4))[1])
    with pytest.raises(ValueError, match="exceeds"):
        next(ds.train_batches(ds.train_size + 1, CPU, 0))


def _write_cifar(root: Path, per_batch: int, n_train_batches: int) -> np.ndarray:
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i + 1}" for i in range(n_train_batches)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size=per_batch)]
        with open(root / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": labels, b"batch_label": name.encode()}, f)
    with open(root / "data_batch_1", "rb") as f:
        return pickle.load(f, encoding="bytes")[b"data"]


def test_cifar_loader_reads_the_standard_pickle_batches(tmp_path: Path) -> None:
    first = _write_cifar(tmp_path / "cifar-10-batches-py", per_batch=20, n_train_batches=2)
    ds = cifar.load(str(tmp_path))
    assert ds.train_x.shape == (40, 3, 32, 32) and ds.train_x.dtype == torch.uint8
    assert ds.eval_x.shape == (20, 3, 32, 32) and ds.eval_y.shape == (20,)
    # channel-major rows: the first 1024 values are the red plane
    assert np.array_equal(ds.train_x[0, 0].numpy().ravel(), first[0, :1024])
    x, y = next(ds.train_batches(8, CPU, 0))
    assert x.dtype == torch.float32 and x.shape == (8, 3, 32, 32) and y.max() < 10
    model_ds, overrides = catalog.load("cnn", "tiny", "cifar10", str(tmp_path))
    assert model_ds is ds and overrides == {"image_shape": (3, 32, 32), "classes": 10}


def test_cifar_loader_names_a_folder_without_batches(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no CIFAR-10 batches"):
        cifar.batch_files(tmp_path)


def test_text_corpus_is_deterministic_with_a_fixed_vocabulary() -> None:
    assert text.VOCAB == 98
    ids = text.encode("def f(x):\n\treturn x  # é")
    assert "".join(text.ALPHABET[i] for i in ids[:-1]) == "def f(x):\n\treturn x  # "
    assert ids[-1] == text.UNKNOWN
    a, b = text.load(16), text.load(16)
    assert a is b  # cached: loaded once per process
    fresh_text, names = text.corpus()
    assert names == sorted(names) and len(fresh_text) == text.MAX_CHARS
    tokens = torch.from_numpy(text.encode(fresh_text))
    assert torch.equal(torch.cat([a.train_tokens, a.eval_tokens]), tokens)
    assert len(a.eval_tokens) == pytest.approx(0.1 * len(tokens), abs=1)
    x, y = next(a.train_batches(4, CPU, 0))
    assert x.shape == (4, 16) and torch.equal(x[:, 1:], y[:, :-1])
    (ex, ey), *_ = a.eval_batches(CPU, limit=32, chunk=32)
    assert ex.shape == (32, 16) and torch.equal(ex[:, 1:], ey[:, :-1])
