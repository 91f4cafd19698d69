"""A user's own data set as one NumPy ``.npz`` file: ``dataset = "npz"``.

The archive holds four arrays, ``x_train``, ``y_train``, ``x_test``, ``y_test``
(what ``np.savez(path, x_train=..., ...)`` writes, and Keras' ``mnist.npz``).
Examples are images ``(N, C, H, W)``, single-channel images ``(N, H, W)`` (read as
``(N, 1, H, W)``) or feature vectors ``(N, F)`` (read as ``(N, F, 1, 1)``: one channel
per feature, so the per-channel normalisation standardises each feature; use
``[train] model = "mlp"`` with them). ``uint8`` pixels are scaled by 1/255 first,
any other numeric type is taken as it is; then each channel is normalised with the
train split's mean and std, as every image data set of edgesim
(:func:`edgesim.learning.data.dataset.image_dataset`). Labels are integers
``0..K-1`` (an integer-valued float array or an ``(N, 1)`` column is accepted);
``K`` is the largest label plus one (at most :data:`MAX_CLASSES` and the number of examples). Nothing is unpickled (``allow_pickle=False``).

Which file: ``[data] file`` (relative to ``data_dir``, or absolute), else the one
``.npz`` file in ``data_dir``. What was read (the file, its SHA-256, the shapes, the
class counts, the normalisation) is recorded in ``summary.json`` under ``dataset``.
Every problem raises :class:`DatasetError` naming the file and what is wrong.
"""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import Dataset, DatasetError, image_dataset
from edgesim.learning.data.files import existing_dir

ARRAYS = ("x_train", "y_train", "x_test", "y_test")
MAX_CLASSES = 100_000
"""The most classes a data set may have (a label of ``MAX_CLASSES`` or more is refused before any model is built:
``K`` = the largest label + 1 sizes the classifier). ImageNet-21k has 21,841."""
EXPECTED = "an .npz archive with arrays x_train, y_train, x_test, y_test (np.savez)"


def find_npz(data_dir, file: str | None = None) -> Path:
    """The ``.npz`` file to read: ``file`` (relative to ``data_dir`` unless absolute), else the only one in ``data_dir``."""
    if file is not None:
        path = Path(file).expanduser()
        if not path.is_absolute():
            path = existing_dir(data_dir, "the npz data set") / path
        if not path.is_file():
            raise DatasetError(f"missing file {path} (data.file = {file!r}); expected {EXPECTED}")
        return path
    folder = existing_dir(data_dir, "the npz data set")
    found = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".npz" and p.is_file())
    if len(found) != 1:
        what = "no .npz file" if not found else f"{len(found)} .npz files ({', '.join(p.name for p in found)})"
        raise DatasetError(f"{folder}: holds {what}; expected exactly one, or name it with the scenario key data.file")
    return found[0]


def _examples(x: np.ndarray, path: Path, key: str) -> tuple[np.ndarray, float]:
    """``x`` as ``(N, C, H, W)`` and its pixel scale (255 for uint8, else 1)."""
    if x.dtype.kind not in "uif":
        raise DatasetError(f"{path}: array {key} has dtype {x.dtype}; expected numbers (uint8 pixels, ints or floats)")
    if x.ndim == 2:
        x = x[:, :, None, None]
    elif x.ndim == 3:
        x = x[:, None]
    elif x.ndim != 4:
        raise DatasetError(f"{path}: array {key} has shape {x.shape}; expected images (N, C, H, W) or (N, H, W), "
                           "or feature vectors (N, F)")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise DatasetError(f"{path}: array {key} holds NaN or infinite values; expected finite numbers")
    return x, 255.0 if x.dtype == np.uint8 else 1.0


def _labels(y: np.ndarray, n: int, path: Path, key: str) -> np.ndarray:
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or len(y) != n:
        raise DatasetError(f"{path}: array {key} has shape {y.shape}; expected ({n},), one label per example")
    if y.dtype.kind == "f":
        if not (np.isfinite(y).all() and (y == np.round(y)).all()):
            raise DatasetError(f"{path}: array {key} holds non-integer labels; expected integers 0..K-1")
    elif y.dtype.kind not in "iub":
        raise DatasetError(f"{path}: array {key} has dtype {y.dtype}; expected integer labels 0..K-1")
    if len(y) and y.min() < 0:
        raise DatasetError(f"{path}: array {key} holds label {y.min().item()!r}; expected integers 0..K-1")
    if len(y) and y.max() >= MAX_CLASSES:  # before any cast (2**64 − 1 would wrap) and any model of K classes
        raise DatasetError(f"{path}: array {key} holds label {y.max().item()!r}, which would make "
                           f"{y.max().item() + 1:.4g} classes (K = the largest label + 1); expected integers 0..K-1 "
                           f"with K at most {MAX_CLASSES:,}")
    return y.astype(np.int64)


def load_npz(data_dir, file: str | None = None) -> Dataset:
    """The data set in one ``.npz`` archive (module docstring): images or feature vectors, normalised per channel."""
    path = find_npz(data_dir, file)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc}); expected {EXPECTED}") from None
    if not raw.startswith((b"PK\x03\x04", b"PK\x05\x06")):  # np.load would take anything else for a pickle
        raise DatasetError(f"{path}: not a readable .npz archive (no zip header: {raw[:8]!r}); expected {EXPECTED}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in ARRAYS if k not in archive.files]
            if missing:
                raise DatasetError(f"{path}: no array {', '.join(missing)} (it holds {', '.join(archive.files) or 'none'});"
                                   f" expected {EXPECTED}")
            arrays = {k: archive[k] for k in ARRAYS}
    except DatasetError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise DatasetError(f"{path}: not a readable .npz archive ({exc}); expected {EXPECTED}") from None
    except ValueError as exc:  # an object array needs pickle, which a data file may not run
        raise DatasetError(f"{path}: {exc}; expected {EXPECTED} of plain numeric arrays") from None
    x_train, scale = _examples(arrays["x_train"], path, "x_train")
    x_test, test_scale = _examples(arrays["x_test"], path, "x_test")
    if x_train.shape[1:] != x_test.shape[1:] or scale != test_scale:
        raise DatasetError(f"{path}: x_train examples are {arrays['x_train'].dtype} {arrays['x_train'].shape[1:]} but "
                           f"x_test's are {arrays['x_test'].dtype} {arrays['x_test'].shape[1:]}; expected the same")
    if len(x_train) == 0 or len(x_test) == 0:
        raise DatasetError(f"{path}: x_train holds {len(x_train)} and x_test {len(x_test)} examples; expected at least one each")
    y_train = _labels(arrays["y_train"], len(x_train), path, "y_train")
    y_test = _labels(arrays["y_test"], len(x_test), path, "y_test")
    n_classes = int(max(y_train.max(), y_test.max())) + 1
    n_examples = len(y_train) + len(y_test)
    if n_classes > n_examples:
        key = "y_train" if y_train.max() >= y_test.max() else "y_test"
        raise DatasetError(f"{path}: array {key} holds label {n_classes - 1}, which makes {n_classes:,} classes (K = "
                           f"the largest label + 1) for {n_examples:,} examples; expected integers 0..K-1 with K at "
                           f"most the number of examples")
    if n_classes < 2:
        raise DatasetError(f"{path}: every label is 0; expected at least two classes")
    ds = image_dataset("npz", x_train, y_train, x_test, y_test, n_classes, None, scale)
    source = {"format": "npz", "file": str(path.resolve()), "sha256": hashlib.sha256(raw).hexdigest(),
              "stored_shape": list(arrays["x_train"].shape[1:]), "dtype": str(arrays["x_train"].dtype),
              "pixel_scale": scale}
    return dataclasses.replace(ds, source=source)
