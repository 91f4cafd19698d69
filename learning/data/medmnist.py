"""MedMNIST (Yang et al., 2023): the single-label 2-D sets, one ``<flag>.npz`` each.

The official train and test splits (``merge_val`` adds the val split to the
train pool); structure checked, md5 not enforced (docs/use/data.md). Nothing is
unpickled. Numpy only.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import Dataset, DatasetError, image_dataset
from edgesim.learning.data.files import check_label_range, existing_dir

MEDMNIST = {
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
MEDMNIST_TITLES = {
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
    check_label_range(y, n_classes, path, key)
    return y


def load_medmnist(path_or_dir: str | Path, flag: str = "pathmnist", merge_val: bool = False) -> Dataset:
    """A single-label MedMNIST set from ``<flag>.npz`` (a file, or a folder holding it or ``medmnist/<flag>.npz``).

    Uses the official train and test splits; ``merge_val`` adds the val split
    to the train pool. The md5 is not enforced (MedMNIST v2 and v3 files
    differ and no canonical size is known); the structure is checked.
    """
    if flag not in MEDMNIST:
        raise ValueError(f"flag(={flag!r}) must be one of {', '.join(MEDMNIST)} (multi-label chestmnist is not supported)")
    n_classes, channels, names = MEDMNIST[flag]
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
