"""One data set in memory: the :class:`Dataset` container, :class:`DatasetError`, and how images are normalised.

Images are float32 ``(n, c, h, w)``, each channel normalised with the mean and
std of the *train* split (pixels first scaled to [0, 1]; :func:`image_dataset`);
the statistics are kept in ``Dataset.mean`` / ``Dataset.std``. Text is an int64
token matrix ``(n, max_len)``, padding index 0, unknown token 1
(:mod:`edgesim.learning.data.tokens`). Labels are int64 in ``[0, n_classes)``.
Every loader (one module per on-disk format) returns a :class:`Dataset`; the
names a scenario may give are :data:`edgesim.learning.data.datasets.DATASETS`.
Numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


class DatasetError(ValueError):
    """A data file is missing, corrupt or malformed; the message names the file and what was expected."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train pool and a test pool with their labels.

    ``kind == "image"``: ``x_*`` float32 ``(n, c, h, w)``, normalised per
    channel with the train split's ``mean`` / ``std`` (on the [0, 1] pixel
    scale). ``kind == "text"``: ``x_*`` int64 ``(n, max_len)`` token ids,
    0 = padding, 1 = unknown, ``vocab_size`` = number of embedding rows.
    """

    name: str
    kind: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    class_names: tuple[str, ...] | None = None
    vocab_size: int | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    source: dict | None = None  # where a user's own files came from (npz, image_folder): recorded in summary.json

    def __post_init__(self):
        if self.kind not in ("image", "text"):
            raise ValueError(f"kind(={self.kind!r}) must be 'image' or 'text'")
        if not isinstance(self.n_classes, int) or self.n_classes < 1:
            raise ValueError(f"n_classes(={self.n_classes!r}) must be an integer >= 1")
        want_dtype, want_ndim = (np.float32, 4) if self.kind == "image" else (np.int64, 2)
        for split in ("train", "test"):
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if x.dtype != want_dtype or x.ndim != want_ndim:
                raise ValueError(
                    f"x_{split} is {x.dtype} with shape {x.shape}; a {self.kind} data set needs "
                    f"{np.dtype(want_dtype).name} with {want_ndim} dimensions")
            if y.dtype != np.int64 or y.ndim != 1 or len(y) != len(x):
                raise ValueError(f"y_{split} is {y.dtype} with shape {y.shape}; expected int64 of shape ({len(x)},)")
            if len(y) and (y.min() < 0 or y.max() >= self.n_classes):
                raise ValueError(f"y_{split} holds labels {y.min()}..{y.max()}; expected 0..{self.n_classes - 1}")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(f"x_train rows {self.x_train.shape[1:]} differ from x_test rows {self.x_test.shape[1:]}")
        if self.class_names is not None and len(self.class_names) != self.n_classes:
            raise ValueError(f"class_names has {len(self.class_names)} names; expected n_classes(={self.n_classes})")
        if self.kind == "text" and (self.vocab_size is None or self.vocab_size < 2):
            raise ValueError(f"vocab_size(={self.vocab_size!r}) must be >= 2 for text (0 = padding, 1 = unknown)")

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one example: ``(c, h, w)`` for images, ``(max_len,)`` for text."""
        return tuple(self.x_train.shape[1:])


def dataset_record(ds: Dataset) -> dict:
    """What a run records of a data set read from a user's files (``summary.json``'s ``dataset``): where it came
    from (``ds.source``), its sizes, the class names and counts per split and the per-channel normalisation."""
    return {
        **(ds.source or {}), "name": ds.name, "n_train": len(ds.y_train), "n_test": len(ds.y_test),
        "input_shape": list(ds.input_shape), "n_classes": ds.n_classes,
        "class_names": list(ds.class_names) if ds.class_names is not None else None,
        "class_counts_train": np.bincount(ds.y_train, minlength=ds.n_classes).tolist(),
        "class_counts_test": np.bincount(ds.y_test, minlength=ds.n_classes).tolist(),
        "normalisation": {"mean": list(ds.mean) if ds.mean is not None else None,
                          "std": list(ds.std) if ds.std is not None else None,
                          "rule": "(x / scale - mean) / std per channel, train split's statistics"},
    }


def byte_counts(x: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
    """How often each value 0..255 occurs in the uint8 array ``x`` (``np.bincount(x.ravel(), minlength=256)``,
    exactly), ``chunk`` bytes at a time: ``np.bincount`` widens its input to int64, and for Fashion-MNIST's 47 M
    train bytes at once that is 376 MB of fresh memory whose first touch cost ~0.4 s on a KVM guest; in chunks,
    ~0.06 s."""
    flat = np.ascontiguousarray(x).reshape(-1)
    counts = np.zeros(256, dtype=np.int64)
    for start in range(0, flat.size, chunk):
        counts += np.bincount(flat[start:start + chunk], minlength=256)
    return counts


def _channel_stats(x: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and std of ``x / scale`` over ``(n, c, h, w)``; exact for uint8 via histograms."""
    means, stds = [], []
    for ch in range(x.shape[1]):
        if x.dtype == np.uint8:
            counts = byte_counts(x[:, ch]).astype(np.float64)
            values = np.arange(256, dtype=np.float64) / scale
            mean = counts @ values / counts.sum()
            var = counts @ (values - mean) ** 2 / counts.sum()
        else:
            channel = x[:, ch].astype(np.float64) / scale
            mean, var = channel.mean(), channel.var()
        means.append(mean)
        stds.append(math.sqrt(var))
    return np.array(means), np.array(stds)


def _normalise(x: np.ndarray, scale: float, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``(x / scale - mean) / std`` per channel, as float32; a constant channel (std 0) is only centred."""
    out = x.astype(np.float32)
    out *= np.float32(1.0 / scale)
    out -= mean.astype(np.float32)[None, :, None, None]
    out /= np.where(std > 0, std, 1.0).astype(np.float32)[None, :, None, None]
    return out


def image_dataset(name, x_train, y_train, x_test, y_test, n_classes, class_names, scale) -> Dataset:
    """Normalise raw ``(n, c, h, w)`` images with the train split's per-channel statistics."""
    mean, std = _channel_stats(x_train, scale)
    return Dataset(
        name=name, kind="image",
        x_train=_normalise(x_train, scale, mean, std), y_train=np.asarray(y_train, dtype=np.int64),
        x_test=_normalise(x_test, scale, mean, std), y_test=np.asarray(y_test, dtype=np.int64),
        n_classes=n_classes, class_names=class_names,
        mean=tuple(float(m) for m in mean), std=tuple(float(s) for s in std))
