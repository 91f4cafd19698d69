"""CIFAR-10 and CIFAR-100 in their python-pickle batches (``cifar-10-batches-py/``, ``cifar-100-python/``).

Unpickled with a restricted unpickler (numpy arrays, dicts and lists only: a
data file runs no code); a file of canonical size must match its published
md5 (docs/use/data.md). Numpy only.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import Dataset, DatasetError, image_dataset
from edgesim.learning.data.files import check_label_range, existing_dir, md5, read_bytes

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
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
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
    data = read_bytes(path, expected)
    known = _CIFAR_MD5[n_classes].get(path.name)
    if known is not None and len(data) == known[0] and md5(data) != known[1]:
        raise DatasetError(
            f"{path}: md5 {md5(data)} does not match the published {known[1]} for this {known[0]}-byte file "
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
    check_label_range(y, n_classes, path, repr(label_key))
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
    names = CIFAR10_CLASSES if variant == 10 else _CIFAR100_CLASSES
    return image_dataset(f"cifar{variant}", x_train, y_train, x_test, y_test, variant, names, 255.0)
