"""IDX files (LeCun's format): MNIST and Fashion-MNIST.

``load_idx`` reads any IDX file of unsigned bytes (gzip-compressed or raw,
detected from the content); ``load_mnist`` reads the four canonical files of
MNIST or Fashion-MNIST (60000 train / 10000 test, 1x28x28, 10 classes) and
checks each against its published md5 (docs/use/data.md). Numpy only.
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import Dataset, DatasetError, image_dataset
from edgesim.learning.data.files import check_label_range, existing_dir, gunzip, is_gzip, md5, read_bytes

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
    data = read_bytes(path, _IDX_EXPECTED)
    raw = gunzip(data, path, _IDX_EXPECTED) if is_gzip(data) else data
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
    data = read_bytes(path, expected)
    file_md5 = md5(data)
    if is_gzip(data):
        try:
            raw = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            mismatch = "" if file_md5 == gz_md5 else f"md5 {file_md5} does not match the published {gz_md5} and "
            raise DatasetError(
                f"{path}: {mismatch}corrupt gzip stream ({exc}) — the file is corrupt or not {pretty}") from None
        content_md5 = md5(raw)
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
        check_label_range(arrays[stem], 10, files[stem], "the label file")
    return image_dataset(
        variant,
        arrays["train-images-idx3-ubyte"][:, None], arrays["train-labels-idx1-ubyte"],
        arrays["t10k-images-idx3-ubyte"][:, None], arrays["t10k-labels-idx1-ubyte"],
        10, _MNIST_CLASSES[variant], 255.0)
