"""Benchmark data sets as numpy arrays, read from the files their authors publish.

Formats: IDX (MNIST, Fashion-MNIST), CIFAR-10/100 python pickles, MedMNIST
``.npz``, DBPedia ontology CSV; plus scikit-learn's bundled digits and a
synthetic generator. Which paper uses which: DoFed-SPP §6.1 (CIFAR-10,
CIFAR-100, DBPedia), UM-pFSSL §V (Fashion-MNIST, CIFAR-10, MedMNIST), FedMix
(CIFAR-10), FedDure §4.1 (CIFAR-10, Fashion-MNIST). Nothing is downloaded.

Images come out as float32 ``(n, c, h, w)``, each channel normalised with the
mean and std of the *train* split (pixels first scaled to [0, 1]); the
statistics are kept in ``Dataset.mean`` / ``Dataset.std``. Text comes out as
an int64 token matrix ``(n, max_len)``, padding index 0, unknown token 1.
Labels are int64 in ``[0, n_classes)``.

The names a scenario may give are those of :data:`DATASETS` (at the end),
the registry that holds each data set's loader and metadata; it is what
``edgesim.learning.config`` validates against and what :func:`load_dataset` looks up.

Every missing, corrupt or malformed file raises :class:`DatasetError` naming
the file and what was expected. Formats, checksums and the choices made where
the sources are silent: ``docs/data.md``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import math
import pickle
import re
import struct
import zipfile
import zlib
from array import array
from collections import Counter
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from pathlib import Path
from typing import Callable

import numpy as np

from edgesim.learning.registry import Registry


class DatasetError(ValueError):
    """A data file is missing, corrupt or malformed; the message names the file and what was expected."""


# --------------------------------------------------------------------------
# The container


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


# --------------------------------------------------------------------------
# Shared helpers


def _read_bytes(path: Path, expected: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"missing file {path}: expected {expected}") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc}); expected {expected}") from None


def _is_gzip(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def _gunzip(data: bytes, path: Path, expected: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(
            f"{path}: corrupt gzip stream ({exc}); expected {expected} — the file is damaged or incomplete") from None


def _channel_stats(x: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and std of ``x / scale`` over ``(n, c, h, w)``; exact for uint8 via histograms."""
    means, stds = [], []
    for ch in range(x.shape[1]):
        if x.dtype == np.uint8:
            counts = np.bincount(x[:, ch].ravel(), minlength=256).astype(np.float64)
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


def _check_label_range(y: np.ndarray, n_classes: int, path: Path, what: str) -> None:
    if len(y) and (y.min() < 0 or y.max() >= n_classes):
        bad = y[(y < 0) | (y >= n_classes)]
        raise DatasetError(
            f"{path}: {what} holds label {int(bad[0])} ({len(bad)} out of range); expected labels 0..{n_classes - 1}")


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def existing_dir(data_dir, what: str) -> Path:
    if data_dir is None:
        raise DatasetError(f"{what} needs files on disk: give their folder as ⟨data-dir⟩, the "
                           "EDGESIM_DATA environment variable, or the scenario key `data.data_dir`")
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise DatasetError(f"data_dir {path} is not a directory; expected a folder holding the {what} files")
    return path


# --------------------------------------------------------------------------
# IDX (MNIST, Fashion-MNIST)

_IDX_EXPECTED = "an IDX file (gzip-compressed or raw)"


def _parse_idx(raw: bytes, path: Path) -> np.ndarray:
    """IDX bytes → read-only uint8 array; checks magic, type byte, dims and size."""
    if len(raw) < 4:
        raise DatasetError(f"{path}: {len(raw)} bytes is too short for an IDX header; expected the 4-byte magic 0x000008NN")
    magic = int.from_bytes(raw[:4], "big")
    if raw[0] != 0 or raw[1] != 0 or raw[3] == 0:
        raise DatasetError(
            f"{path}: bad IDX magic 0x{magic:08x}; expected 0x000008NN (two zero bytes, type 0x08, NN >= 1 dimensions), "
            "e.g. 0x00000803 for images and 0x00000801 for labels — not an IDX file")
    if raw[2] != 0x08:
        raise DatasetError(f"{path}: IDX type byte 0x{raw[2]:02x} (magic 0x{magic:08x}); expected 0x08 (unsigned byte)")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetError(f"{path}: IDX header truncated: {len(raw)} bytes; expected {header} for {ndim} dimensions")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    expected, got = math.prod(dims), len(raw) - header
    if got != expected:
        problem = "truncated" if got < expected else "has trailing bytes"
        raise DatasetError(
            f"{path}: IDX data {problem}: {got} bytes after the header; expected {expected} "
            f"(= {' x '.join(map(str, dims))} from the header)")
    return np.frombuffer(raw, dtype=np.uint8, count=expected, offset=header).reshape(dims)


def load_idx(path: str | Path) -> np.ndarray:
    """The uint8 array stored in an IDX file (gzip-compressed or raw; detected from the content)."""
    path = Path(path)
    data = _read_bytes(path, _IDX_EXPECTED)
    raw = _gunzip(data, path, _IDX_EXPECTED) if _is_gzip(data) else data
    return _parse_idx(raw, path).copy()


_MNIST_PRETTY = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}
_MNIST_SUBDIRS = {"mnist": ("mnist", "MNIST/raw"), "fashion_mnist": ("fashion-mnist", "fashion_mnist", "FashionMNIST/raw")}
# file stem -> (shape, md5 of the published .gz, md5 of the decompressed file); data/README.md
_MNIST_FILES = {
    "mnist": {
        "train-images-idx3-ubyte": ((60000, 28, 28), "f68b3c2dcbeaaa9fbdd348bbdeb94873", "6bbc9ace898e44ae57da46a324031adb"),
        "train-labels-idx1-ubyte": ((60000,), "d53e105ee54ea40749a09fcbcd1e9432", "a25bea736e30d166cdddb491f175f624"),
        "t10k-images-idx3-ubyte": ((10000, 28, 28), "9fb629c4189551a2d022fa330f9573f3", "2646ac647ad5339dbf082846283269ea"),
        "t10k-labels-idx1-ubyte": ((10000,), "ec29112dd5afa0611ce80d1b7f02629c", "27ae3e4e09519cfbb04c329615203637"),
    },
    "fashion_mnist": {
        "train-images-idx3-ubyte": ((60000, 28, 28), "8d4fb7e6c68d591d4c3dfef9ec88bf0d", "f4a8712d7a061bf5bd6d2ca38dc4d50a"),
        "train-labels-idx1-ubyte": ((60000,), "25c81989df183df01b3e8a0aad5dffbe", "9018921c3c673c538a1fc5bad174d6f9"),
        "t10k-images-idx3-ubyte": ((10000, 28, 28), "bef4ecab320f06d8554ea6380940ec79", "8181f5470baa50b63fa0f6fddb340f0a"),
        "t10k-labels-idx1-ubyte": ((10000,), "bb300cfdad3c16e7a12a480ee83cd310", "15d484375f8d13e6eb1aabb0c3f46965"),
    },
}
_MNIST_CLASSES = {
    "mnist": tuple(str(d) for d in range(10)),
    "fashion_mnist": ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                      "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
}


def _find_mnist_files(data_dir: Path, variant: str) -> dict[str, Path]:
    """The four IDX files (``.gz`` preferred, else raw) in data_dir itself or its canonical subfolder."""
    stems = list(_MNIST_FILES[variant])
    candidates = [data_dir] + [data_dir / sub for sub in _MNIST_SUBDIRS[variant]]
    best: tuple[int, Path] | None = None
    for folder in candidates:
        found = {}
        for stem in stems:
            for name in (stem + ".gz", stem):
                if (folder / name).is_file():
                    found[stem] = folder / name
                    break
        if len(found) == len(stems):
            return found
        if found and (best is None or len(found) > best[0]):
            best = (len(found), folder)
    folder = best[1] if best else candidates[1]
    missing = next(s for s in stems if not ((folder / (s + ".gz")).is_file() or (folder / s).is_file()))
    pretty = _MNIST_PRETTY[variant]
    raise DatasetError(
        f"missing file {folder / (missing + '.gz')}: expected the four IDX files of {pretty} "
        f"({', '.join(s + '.gz' for s in stems)}; uncompressed also accepted) under {data_dir} "
        f"or {' or '.join(str(data_dir / s) for s in _MNIST_SUBDIRS[variant])}")


def _load_verified_idx(path: Path, gz_md5: str, raw_md5: str, shape: tuple[int, ...], pretty: str) -> np.ndarray:
    """Read one canonical IDX file, check its published md5 (of the .gz, or of the content) and its shape."""
    expected = f"the {pretty} file {path.name}"
    data = _read_bytes(path, expected)
    file_md5 = _md5(data)
    if _is_gzip(data):
        try:
            raw = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            mismatch = "" if file_md5 == gz_md5 else f"md5 {file_md5} does not match the published {gz_md5} and "
            raise DatasetError(
                f"{path}: {mismatch}corrupt gzip stream ({exc}) — the file is corrupt or not {pretty}") from None
        content_md5 = _md5(raw)
        if file_md5 != gz_md5 and content_md5 != raw_md5:  # a re-compressed copy of the same content is fine
            raise DatasetError(
                f"{path}: md5 {file_md5} does not match the published {gz_md5} (decompressed md5 {content_md5}, "
                f"published {raw_md5}) — the file is corrupt or not {pretty}")
    else:
        raw = data
        if file_md5 != raw_md5:
            raise DatasetError(
                f"{path}: md5 {file_md5} does not match the published {raw_md5} (uncompressed) "
                f"— the file is corrupt or not {pretty}")
    array_ = _parse_idx(raw, path)
    if array_.shape != shape:
        raise DatasetError(f"{path}: IDX shape {array_.shape}; expected {shape} for {pretty}")
    return array_


def load_mnist(data_dir: str | Path, variant: str = "mnist") -> Dataset:
    """MNIST or Fashion-MNIST from the four canonical IDX files (60000 train / 10000 test, 1x28x28, 10 classes).

    Looks in ``data_dir`` itself, then ``data_dir/mnist`` (resp.
    ``data_dir/fashion-mnist``) and torchvision's ``<Name>/raw`` layout. Each
    file must match its published md5 (of the ``.gz``; a re-compressed or
    uncompressed copy is accepted when its content md5 is the published one).
    """
    if variant not in _MNIST_FILES:
        raise ValueError(f"variant(={variant!r}) must be 'mnist' or 'fashion_mnist'")
    pretty = _MNIST_PRETTY[variant]
    files = _find_mnist_files(existing_dir(data_dir, pretty), variant)
    arrays = {}
    for stem, (shape, gz_md5, raw_md5) in _MNIST_FILES[variant].items():
        arrays[stem] = _load_verified_idx(files[stem], gz_md5, raw_md5, shape, pretty)
    for stem in ("train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"):
        _check_label_range(arrays[stem], 10, files[stem], "the label file")
    return image_dataset(
        variant,
        arrays["train-images-idx3-ubyte"][:, None], arrays["train-labels-idx1-ubyte"],
        arrays["t10k-images-idx3-ubyte"][:, None], arrays["t10k-labels-idx1-ubyte"],
        10, _MNIST_CLASSES[variant], 255.0)


# --------------------------------------------------------------------------
# CIFAR-10 / CIFAR-100 (python pickles)

_CIFAR = {
    10: dict(pretty="CIFAR-10", folder="cifar-10-batches-py", label_key=b"labels",
             train=tuple(f"data_batch_{i}" for i in range(1, 6)), test=("test_batch",)),
    100: dict(pretty="CIFAR-100", folder="cifar-100-python", label_key=b"fine_labels",
              train=("train",), test=("test",)),
}
# canonical (size in bytes, md5); data/README.md (git-annex keys of datasets-mila/datasets--cifar10/100)
_CIFAR_MD5 = {
    10: {"data_batch_1": (31035704, "c99cafc152244af753f735de768cd75f"),
         "data_batch_2": (31035320, "d4bba439e000b95fd0a9bffe97cbabec"),
         "data_batch_3": (31035999, "54ebc095f3ab1f0389bbae665268c751"),
         "data_batch_4": (31035696, "634d18415352ddfa80567beed471001a"),
         "data_batch_5": (31035623, "482c414d41f54cd18b22e5b47cb7c3cb"),
         "test_batch": (31035526, "40351d587109b95175f43aff81a1287e")},
    100: {"train": (155249918, "16019d7e3df5f24257cddd939b257f8d"),
          "test": (31049707, "f0ef6b0ae62326f3e7ffdfab6717acfc")},
}
_CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
_CIFAR100_CLASSES = tuple("""
apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly camel can castle
caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup dinosaur dolphin elephant flatfish
forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion lizard lobster man maple_tree motorcycle
mountain mouse mushroom oak_tree orange orchid otter palm_tree pear pickup_truck pine_tree plain plate poppy porcupine
possum rabbit raccoon ray road rocket rose sea seal shark shrew skunk skyscraper snail snake spider squirrel streetcar
sunflower sweet_pepper table tank telephone television tiger tractor train trout tulip turtle wardrobe whale
willow_tree wolf woman worm""".split())

# what a CIFAR pickle may reference: numpy's array reconstruction, nothing else
_PICKLE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"): ("numpy._core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"): ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"): ("numpy._core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"): ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"): ("numpy", "ndarray"),
    ("numpy", "dtype"): ("numpy", "dtype"),
    ("_codecs", "encode"): ("_codecs", "encode"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists and numpy arrays only; any other global is refused (a data file runs no code)."""

    def find_class(self, module, name):
        target = _PICKLE_GLOBALS.get((module, name))
        if target is None:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")
        return super().find_class(*target)


def _load_cifar_batch(path: Path, label_key: bytes, n_classes: int, pretty: str) -> tuple[np.ndarray, np.ndarray]:
    """One python batch → (uint8 (n, 3, 32, 32), int64 (n,))."""
    expected = f"a {pretty} python batch (a pickled dict with b'data' (n, 3072) uint8 and {label_key!r})"
    data = _read_bytes(path, expected)
    known = _CIFAR_MD5[n_classes].get(path.name)
    if known is not None and len(data) == known[0] and _md5(data) != known[1]:
        raise DatasetError(
            f"{path}: md5 {_md5(data)} does not match the published {known[1]} for this {known[0]}-byte file "
            f"— the file is corrupt or not {pretty}")
    try:
        obj = _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception as exc:  # pickle raises many types on garbage; none may escape unexplained
        raise DatasetError(f"{path}: cannot unpickle it ({type(exc).__name__}: {exc}); expected {expected}") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{path}: holds a {type(obj).__name__}; expected {expected}")
    obj = {k.encode() if isinstance(k, str) else k: v for k, v in obj.items()}
    for key in (b"data", label_key):
        if key not in obj:
            raise DatasetError(f"{path}: no key {key!r} (keys: {sorted(obj)}); expected {expected}")
    x = obj[b"data"]
    if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072:
        desc = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
        raise DatasetError(f"{path}: b'data' is {desc}; expected uint8 of shape (n, 3072) = (n, 3x32x32)")
    try:
        y = np.asarray(obj[label_key])
    except Exception:  # ragged or odd objects
        y = np.empty(0, dtype=object)
    if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(f"{path}: {label_key!r} has {y.dtype} shape {y.shape}; expected {len(x)} integer labels")
    y = y.astype(np.int64)
    _check_label_range(y, n_classes, path, repr(label_key))
    return x.reshape(len(x), 3, 32, 32), y


def load_cifar(data_dir: str | Path, variant: int = 10) -> Dataset:
    """CIFAR-10 (``cifar-10-batches-py/``) or CIFAR-100 (``cifar-100-python/``, fine labels), 3x32x32.

    ``data_dir`` may be that folder itself or its parent. Files are checked
    for structure; a file with its canonical size must also match its
    published md5 (a different size is read on structure alone).
    """
    if variant not in _CIFAR:
        raise ValueError(f"variant(={variant!r}) must be 10 or 100")
    spec = _CIFAR[variant]
    root = existing_dir(data_dir, spec["pretty"])
    folder = root if (root / spec["test"][0]).is_file() or root.name == spec["folder"] else root / spec["folder"]
    for name in spec["train"] + spec["test"]:
        if not (folder / name).is_file():
            raise DatasetError(
                f"missing file {folder / name}: expected the {spec['pretty']} python files "
                f"({', '.join(spec['train'] + spec['test'])}) under {root / spec['folder']} or {root}")
    parts = {split: [_load_cifar_batch(folder / n, spec["label_key"], variant, spec["pretty"]) for n in spec[split]]
             for split in ("train", "test")}
    x_train = np.concatenate([x for x, _ in parts["train"]])
    y_train = np.concatenate([y for _, y in parts["train"]])
    x_test = np.concatenate([x for x, _ in parts["test"]])
    y_test = np.concatenate([y for _, y in parts["test"]])
    names = _CIFAR10_CLASSES if variant == 10 else _CIFAR100_CLASSES
    return image_dataset(f"cifar{variant}", x_train, y_train, x_test, y_test, variant, names, 255.0)


# --------------------------------------------------------------------------
# CINIC-10 (folders of PNGs)

_CINIC_FOLDERS = ("cinic-10", "CINIC-10", "cinic10")


def load_cinic10(data_dir: str | Path) -> Dataset:
    """CINIC-10 (Darlow et al., 2018): ``train/``, ``test/`` (and ``valid/``, not used), each with one folder of
    32×32 RGB PNGs per CIFAR-10 class name, under ``data_dir`` or ``data_dir/cinic-10`` (as the archive unpacks).

    Every image must be 32×32; a grayscale PNG (CINIC-10 has some) is
    repeated over the three channels. Labels follow CIFAR-10's class order.
    """
    from PIL import Image

    root = existing_dir(data_dir, "CINIC-10")
    folder = next((root / f for f in _CINIC_FOLDERS if (root / f / "train").is_dir()), root)
    splits = {}
    for split in ("train", "test"):
        missing = [c for c in _CIFAR10_CLASSES if not (folder / split / c).is_dir()]
        if missing:
            raise DatasetError(f"missing folders {', '.join(str(folder / split / c) for c in missing[:3])}"
                               f"{' ...' if len(missing) > 3 else ''}: expected CINIC-10's train/ and test/ with one "
                               f"folder per class under {root} or {root}/cinic-10")
        xs, ys = [], []
        for label, name in enumerate(_CIFAR10_CLASSES):
            for png in sorted((folder / split / name).glob("*.png")):
                with Image.open(png) as im:
                    a = np.asarray(im.convert("RGB"), dtype=np.uint8)
                if a.shape != (32, 32, 3):
                    raise DatasetError(f"{png}: a {a.shape[1]}x{a.shape[0]} image; CINIC-10 images are 32x32")
                xs.append(a.transpose(2, 0, 1))
                ys.append(label)
        if not xs:
            raise DatasetError(f"no PNG images under {folder / split}")
        splits[split] = (np.stack(xs), np.asarray(ys, dtype=np.int64))
    return image_dataset("cinic10", *splits["train"], *splits["test"], 10, _CIFAR10_CLASSES, 255.0)


# --------------------------------------------------------------------------
# MedMNIST (.npz)

# flag -> (classes, channels, class names or None); single-label 2-D MedMNIST sets (medmnist/info.py)
_MEDMNIST = {
    "pathmnist": (9, 3, ("adipose", "background", "debris", "lymphocytes", "mucus", "smooth muscle",
                         "normal colon mucosa", "cancer-associated stroma", "colorectal adenocarcinoma epithelium")),
    "organamnist": (11, 1, ("bladder", "femur-left", "femur-right", "heart", "kidney-left", "kidney-right",
                            "liver", "lung-left", "lung-right", "pancreas", "spleen")),
    "organcmnist": (11, 1, None),
    "organsmnist": (11, 1, None),
    "dermamnist": (7, 3, None),
    "octmnist": (4, 1, None),
    "pneumoniamnist": (2, 1, None),
    "retinamnist": (5, 3, None),
    "breastmnist": (2, 1, None),
    "bloodmnist": (8, 3, None),
    "tissuemnist": (8, 1, None),
}
_MEDMNIST_TITLES = {
    "pathmnist": "PathMNIST", "organamnist": "OrganAMNIST", "organcmnist": "OrganCMNIST", "organsmnist": "OrganSMNIST",
    "dermamnist": "DermaMNIST", "octmnist": "OCTMNIST", "pneumoniamnist": "PneumoniaMNIST",
    "retinamnist": "RetinaMNIST", "breastmnist": "BreastMNIST", "bloodmnist": "BloodMNIST", "tissuemnist": "TissueMNIST",
}
_MEDMNIST_KEYS = ("train_images", "train_labels", "val_images", "val_labels", "test_images", "test_labels")


def _medmnist_images(x: np.ndarray, channels: int, path: Path, key: str) -> np.ndarray:
    """(n, h, w) grayscale or (n, h, w, 3) RGB uint8 → (n, c, h, w)."""
    gray_ok = channels == 1 and x.ndim == 3
    rgb_ok = channels == 3 and x.ndim == 4 and x.shape[3] == 3
    if x.dtype != np.uint8 or not (gray_ok or rgb_ok) or x.shape[1] != x.shape[2]:
        want = "(n, s, s) grayscale" if channels == 1 else "(n, s, s, 3) RGB"
        raise DatasetError(f"{path}: {key} is {x.dtype} {x.shape}; expected uint8 {want}")
    return x[:, None] if channels == 1 else x.transpose(0, 3, 1, 2)


def _medmnist_labels(y: np.ndarray, n: int, n_classes: int, path: Path, key: str) -> np.ndarray:
    if y.shape not in ((n, 1), (n,)) or not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(f"{path}: {key} is {y.dtype} {y.shape}; expected integer labels of shape ({n}, 1)")
    y = y.reshape(n).astype(np.int64)
    _check_label_range(y, n_classes, path, key)
    return y


def load_medmnist(path_or_dir: str | Path, flag: str = "pathmnist", merge_val: bool = False) -> Dataset:
    """A single-label MedMNIST set from ``<flag>.npz`` (a file, or a folder holding it or ``medmnist/<flag>.npz``).

    Uses the official train and test splits; ``merge_val`` adds the val split
    to the train pool. The md5 is not enforced (MedMNIST v2 and v3 files
    differ and no canonical size is known); the structure is checked.
    """
    if flag not in _MEDMNIST:
        raise ValueError(f"flag(={flag!r}) must be one of {', '.join(_MEDMNIST)} (multi-label chestmnist is not supported)")
    n_classes, channels, names = _MEDMNIST[flag]
    if path_or_dir is None:
        existing_dir(None, f"MedMNIST {flag}")
    path = Path(path_or_dir).expanduser()
    if path.is_dir():
        candidates = [path / f"{flag}.npz", path / "medmnist" / f"{flag}.npz"]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise DatasetError(f"missing file {candidates[0]}: expected the MedMNIST file {flag}.npz "
                               f"in {candidates[0].parent} or {candidates[1].parent}")
    elif not path.is_file():
        raise DatasetError(f"missing file {path}: expected the MedMNIST file {flag}.npz")
    expected = f"a MedMNIST .npz with arrays {', '.join(_MEDMNIST_KEYS)}"
    keys = [k for k in _MEDMNIST_KEYS if merge_val or not k.startswith("val")]
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in keys if k not in npz.files]
            if missing:
                raise DatasetError(f"{path}: no array {missing[0]!r} (has {sorted(npz.files)}); expected {expected}")
            arrays = {k: npz[k] for k in keys}
    except DatasetError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: cannot read it as .npz ({type(exc).__name__}: {exc}); expected {expected}") from None
    splits = {}
    for split in ("train", "val", "test"):
        if f"{split}_images" in arrays:
            x = _medmnist_images(arrays[f"{split}_images"], channels, path, f"{split}_images")
            y = _medmnist_labels(arrays[f"{split}_labels"], len(x), n_classes, path, f"{split}_labels")
            splits[split] = (x, y)
    x_train, y_train = splits["train"]
    if merge_val:
        x_train = np.concatenate([x_train, splits["val"][0]])
        y_train = np.concatenate([y_train, splits["val"][1]])
    if x_train.shape[1:] != splits["test"][0].shape[1:]:
        raise DatasetError(f"{path}: train images {x_train.shape[1:]} and test images {splits['test'][0].shape[1:]} differ")
    return image_dataset(flag, x_train, y_train, *splits["test"], n_classes, names, 255.0)


def _load_medmnist_flag(data_dir, merge_val: bool = False, *, flag: str) -> Dataset:
    return load_medmnist(data_dir, flag, merge_val)


# --------------------------------------------------------------------------
# DBPedia ontology (CSV) and token helpers

_DBPEDIA_CLASSES = ("Company", "EducationalInstitution", "Artist", "Athlete", "OfficeHolder", "MeanOfTransportation",
                    "Building", "NaturalPlace", "Village", "Animal", "Plant", "Album", "Film", "WrittenWork")
# canonical (size in bytes, sha256); data/README.md
_DBPEDIA_SHA256 = {
    "train.csv": (174148970, "3fea0c8c6ae73d0911f9cf37ec68606d169c4edd9214c6443b035649a3fb38ce"),
    "test.csv": (21775285, "3d7b5fc00870e3446e322479af553629f55e313dd3b4249c08b68132d1230804"),
}
_TOKEN = re.compile(r"[^\W_]+")  # runs of Unicode letters/digits; punctuation and "_" separate tokens
PAD, UNK = 0, 1


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens: maximal runs of Unicode letters and digits."""
    return _TOKEN.findall(text.lower())


def _read_dbpedia_csv(path: Path) -> tuple[np.ndarray, list[str]]:
    """Rows ``label(1..14),title,content`` → (labels 0..13, texts "title content")."""
    expected = "CSV rows label(1..14),title,content"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DatasetError(f"missing file {path}: expected the DBPedia file {path.name} ({expected})") from None
    known = _DBPEDIA_SHA256.get(path.name)
    if known and size == known[0]:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != known[1]:
            raise DatasetError(f"{path}: sha256 {digest.hexdigest()} does not match the published {known[1]} "
                               f"for this {known[0]}-byte file — the file is corrupt or not DBPedia")
    labels, texts = [], []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        try:
            for row in reader:
                if len(row) != 3:
                    raise DatasetError(f"{path}:{reader.line_num}: {len(row)} fields; expected 3 fields: {expected}")
                label = row[0].strip()
                if not (label.isascii() and label.isdigit() and 1 <= int(label) <= 14):
                    raise DatasetError(f"{path}:{reader.line_num}: label {row[0]!r}; expected an integer 1..14 ({expected})")
                labels.append(int(label) - 1)
                texts.append(f"{row[1]} {row[2]}")
        except csv.Error as exc:
            raise DatasetError(f"{path}:{reader.line_num}: malformed CSV ({exc}); expected {expected}") from None
        except UnicodeDecodeError as exc:
            raise DatasetError(
                f"{path}: after line {reader.line_num}: not UTF-8 ({exc.reason}); expected UTF-8 {expected}") from None
    if not labels:
        raise DatasetError(f"{path}: no rows; expected {expected}")
    return np.array(labels, dtype=np.int64), texts


def _check_vocab_size(vocab_size) -> None:
    if not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size(={vocab_size!r}) must be an integer >= 2 (0 = padding, 1 = unknown)")


def _check_max_len(max_len) -> None:
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len(={max_len!r}) must be an integer >= 1")


def _rank(counts: Counter, vocab_size: int) -> dict[str, int]:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: vocab_size - 2]
    return {token: rank + 2 for rank, (token, _) in enumerate(ranked)}


def build_vocab(texts: list[str], vocab_size: int) -> dict[str, int]:
    """Token → id for the ``vocab_size - 2`` most frequent tokens (ids 2..), ties broken by the token string.

    Ids 0 (padding) and 1 (unknown) are reserved, so ``vocab_size`` is the
    number of embedding rows a model needs.
    """
    _check_vocab_size(vocab_size)
    counts: Counter = Counter()
    for text in texts:
        counts.update(tokenize(text))
    return _rank(counts, vocab_size)


def _encode_tokens(token_lists, n: int, vocab: dict[str, int], max_len: int) -> np.ndarray:
    flat, lengths = array("q"), np.zeros(n, dtype=np.int64)
    for row, tokens in enumerate(token_lists):
        tokens = tokens[:max_len]
        flat.extend(map(vocab.get, tokens, repeat(UNK)))
        lengths[row] = len(tokens)
    out = np.zeros((n, max_len), dtype=np.int64)
    out[np.arange(max_len) < lengths[:, None]] = np.frombuffer(flat, dtype=np.int64) if len(flat) else 0
    return out


def encode(texts: list[str], vocab: dict[str, int], max_len: int) -> np.ndarray:
    """Texts → int64 ``(n, max_len)``: the first ``max_len`` tokens' ids (unknown → 1), padded with 0."""
    _check_max_len(max_len)
    return _encode_tokens((tokenize(t) for t in texts), len(texts), vocab, max_len)


def to_offsets(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Padded ``(n, max_len)`` ids → ``(flat, offsets)`` for ``nn.EmbeddingBag(input, offsets)``.

    ``flat`` holds each row's non-padding ids in order; ``offsets[i]`` is
    where row i starts (an all-padding row is an empty bag).
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens has {tokens.dtype} shape {tokens.shape}; expected a 2-D integer matrix")
    keep = tokens != PAD
    lengths = keep.sum(axis=1)
    offsets = np.zeros(len(tokens), dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    return tokens[keep].astype(np.int64), offsets


def load_dbpedia(data_dir: str | Path, vocab_size: int = 199_000, max_len: int = 100) -> Dataset:
    """DBPedia ontology (14 classes) from ``dbpedia_csv/train.csv`` and ``test.csv``.

    Text = title + " " + content, lower-cased and split by :func:`tokenize`;
    vocabulary from the TRAIN split only (:func:`build_vocab`); each document
    keeps its first ``max_len`` tokens. ``vocab_size`` counts the two reserved
    ids; the default 199k rows x 64 dims gives DoFed-SPP's ≈51 MB text model.
    """
    root = existing_dir(data_dir, "DBPedia")
    folder = root if (root / "train.csv").is_file() else root / "dbpedia_csv"
    for name in ("train.csv", "test.csv"):
        if not (folder / name).is_file():
            raise DatasetError(f"missing file {folder / name}: expected the DBPedia CSV files train.csv and test.csv "
                               f"under {root / 'dbpedia_csv'} or {root}")
    _check_vocab_size(vocab_size)
    _check_max_len(max_len)
    y_train, texts = _read_dbpedia_csv(folder / "train.csv")
    y_test, test_texts = _read_dbpedia_csv(folder / "test.csv")
    counts: Counter = Counter()
    for i, text in enumerate(texts):  # one regex pass over train: count all tokens, keep the first max_len
        tokens = tokenize(text)
        counts.update(tokens)
        texts[i] = " ".join(tokens[:max_len])  # tokens hold no whitespace, so split() restores them
    vocab = _rank(counts, vocab_size)
    return Dataset(
        name="dbpedia", kind="text",
        x_train=_encode_tokens((t.split() for t in texts), len(texts), vocab, max_len), y_train=y_train,
        x_test=encode(test_texts, vocab, max_len), y_test=y_test,
        n_classes=14, class_names=_DBPEDIA_CLASSES, vocab_size=len(vocab) + 2)


# --------------------------------------------------------------------------
# Bundled and synthetic data


# The 360 test samples of scikit-learn's ``train_test_split(arange(1797), test_size=0.2, stratify=target,
# random_state=0)`` as a bit mask (``np.packbits``, hex): recorded once, so that loading the digits imports neither
# scikit-learn nor SciPy (~0.4-0.8 s of every default run); tests/test_datasets.py checks it against scikit-learn.
_DIGITS_TEST_MASK = (
    "000004883524104000064100934205001a00080100240028062c12001000940a009019120420f8a0028110a000080a882044"
    "1524494240a00a0000004004d80000818020004805c400104008a0100005404800301000020ec409000224840083a8013c20"
    "a6980a0000000b08400804a0184802024041c1008004404684376a810216004480004042a0a4180a5000840b8561c6081080"
    "08004c80c02004068e00010882008100380803c008190000100e01008410a0210033282904c044c080680e01028300820088"
    "22a6402c24042108a860809081a00c02820242120138a41500"
)


def _digits_csv() -> Path:
    """scikit-learn's bundled ``digits.csv.gz`` (found without importing scikit-learn)."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(roots[0], "datasets", "data", "digits.csv.gz") if roots else None
    if path is None or not path.is_file():
        raise DatasetError("dataset 'digits' is scikit-learn's bundled copy (sklearn/datasets/data/digits.csv.gz), "
                           "which was not found; expected scikit-learn installed (it is a dependency of edgesim)")
    return path


def load_digits() -> Dataset:
    """scikit-learn's bundled 8x8 digits (1797 samples, 10 classes), no download.

    A fixed stratified 80/20 split (scikit-learn's ``train_test_split`` with
    ``random_state=0``, independent of any run seed, recorded in
    ``_DIGITS_TEST_MASK``): 1437 train / 360 test; pixels 0..16 scaled to [0, 1].
    """
    data = np.loadtxt(_digits_csv(), delimiter=",")
    x, y = data[:, :-1].reshape(-1, 1, 8, 8), data[:, -1].astype(np.int64)
    test = np.unpackbits(np.frombuffer(bytes.fromhex(_DIGITS_TEST_MASK), np.uint8))[:len(y)].astype(bool)
    return image_dataset("digits", x[~test], y[~test], x[test], y[test], 10,
                          tuple(str(d) for d in range(10)), 16.0)


def make_synthetic(n_train: int = 1000, n_test: int = 200, shape: tuple[int, ...] = (1, 8, 8),
                   n_classes: int = 10, seed: int = 0, noise_std: float = 1.0) -> Dataset:
    """Gaussian class blobs as images: ``x = prototype[y] + noise_std * N(0, I)``, prototypes ~ N(0, I).

    Labels are balanced (counts differ by at most one) and shuffled; the
    same arguments give the same arrays.
    """
    for name, value, low in (("n_train", n_train, 1), ("n_test", n_test, 1), ("n_classes", n_classes, 2)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name}(={value!r}) must be an integer >= {low}")
    shape = tuple(shape)
    if len(shape) != 3 or not all(isinstance(s, (int, np.integer)) and s >= 1 for s in shape):
        raise ValueError(f"shape(={shape!r}) must be three positive integers (c, h, w)")
    if not (isinstance(noise_std, (int, float)) and math.isfinite(noise_std) and noise_std >= 0):
        raise ValueError(f"noise_std(={noise_std!r}) must be a finite number >= 0")
    rng = np.random.default_rng(seed)
    prototypes = rng.standard_normal((n_classes, *shape), dtype=np.float32)

    def draw(n):
        y = rng.permutation(np.arange(n) % n_classes).astype(np.int64)
        noise = rng.standard_normal((n, *shape), dtype=np.float32)
        return prototypes[y] + np.float32(noise_std) * noise, y

    x_train, y_train = draw(n_train)
    x_test, y_test = draw(n_test)
    return image_dataset("synthetic", x_train, y_train, x_test, y_test, n_classes, None, 1.0)


# --------------------------------------------------------------------------
# The registry and the dispatch

@dataclass(frozen=True)
class DatasetSpec:
    """One ``[data] dataset`` name: its loader ``load(data_dir, **options) -> Dataset`` and metadata.

    ``title``: how the papers write the name; ``kind``: "image" or "text";
    ``needs_files``: whether ``data_dir`` is required; ``options``: the
    keyword options :func:`load_dataset` passes on to the loader;
    ``n_classes``: the class count, known without the files (``None`` where an
    option sets it), so that ``edgesim plan`` needs no data.
    ``hflip_preserves_labels``: whether a left–right mirror of an image keeps its
    label. A mirrored digit is not the same digit (FixMatch, Sohn et al. 2020,
    §2.3, drops the flip for SVHN), OrganMNIST names left and right organs and
    random Gaussian blobs have no symmetry: ``False`` for those; natural images
    (CIFAR, CINIC-10, Fashion-MNIST's garments) ``True``. ``weak``/``strong``
    views and FedMix's perturbations flip only where it is ``True``
    (:func:`edgesim.learning.augment.make_augmentation`).
    """

    name: str
    title: str
    kind: str
    load: Callable[..., Dataset]
    needs_files: bool = True
    options: tuple[str, ...] = ()
    n_classes: int | None = None
    hflip_preserves_labels: bool = True


DATASETS = Registry("dataset", error=DatasetError)
"""Every data set by name; the single source of the names (``edgesim.learning.config`` validates against it)."""

for _spec in (
    DatasetSpec("digits", "scikit-learn digits", "image", lambda d: load_digits(), needs_files=False, n_classes=10,
                hflip_preserves_labels=False),
    DatasetSpec("mnist", "MNIST", "image", lambda d: load_mnist(d, "mnist"), n_classes=10,
                hflip_preserves_labels=False),
    DatasetSpec("fashion_mnist", "Fashion-MNIST", "image", lambda d: load_mnist(d, "fashion_mnist"), n_classes=10),
    DatasetSpec("cifar10", "CIFAR-10", "image", lambda d: load_cifar(d, 10), n_classes=10),
    DatasetSpec("cifar100", "CIFAR-100", "image", lambda d: load_cifar(d, 100), n_classes=100),
    DatasetSpec("cinic10", "CINIC-10", "image", load_cinic10, n_classes=10),
    *(DatasetSpec(flag, _MEDMNIST_TITLES[flag], "image", partial(_load_medmnist_flag, flag=flag), options=("merge_val",),
                  n_classes=_MEDMNIST[flag][0], hflip_preserves_labels=not flag.startswith("organ"))
      for flag in _MEDMNIST),
    DatasetSpec("dbpedia", "DBPedia", "text", load_dbpedia, options=("vocab_size", "max_len"), n_classes=14),
    DatasetSpec("synthetic", "synthetic Gaussian blobs", "image", lambda d, **o: make_synthetic(**o), needs_files=False,
                options=("n_train", "n_test", "shape", "n_classes", "seed", "noise_std"), hflip_preserves_labels=False),
):
    DATASETS.add(_spec)
DATASET_NAMES = DATASETS.names  # kept for callers


def load_dataset(name: str, data_dir: str | Path | None = None, **options) -> Dataset:
    """Load a data set by name; ``options`` go to its loader (e.g. ``vocab_size`` for dbpedia).

    Names: those of :data:`DATASETS` (digits, mnist, fashion_mnist, cifar10,
    cifar100, the MedMNIST flags, dbpedia, synthetic). Nothing is cached:
    each call reads the files again.
    """
    spec = DATASETS.lookup(name)
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise DatasetError(f"unknown option(s) {', '.join(unknown)} for dataset {name!r}; "
                           f"expected: {', '.join(spec.options) if spec.options else 'none'}")
    if spec.needs_files and data_dir is None:
        raise DatasetError(f"dataset {name!r} needs files on disk: give their folder as ⟨data-dir⟩, "
                           "the EDGESIM_DATA environment variable, or the scenario key `data.data_dir`")
    return spec.load(data_dir, **options)
