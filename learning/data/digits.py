"""scikit-learn's bundled 8x8 digits (``sklearn/datasets/data/digits.csv.gz``), read without importing scikit-learn.

A fixed stratified 80/20 split, recorded as a bit mask (docs/use/data.md). Numpy only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import Dataset, DatasetError, image_dataset

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
