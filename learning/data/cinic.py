"""CINIC-10 (Darlow et al., 2018): folders of 32×32 PNGs, one per CIFAR-10 class.

Read with Pillow (imported on first use). Numpy only at import.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgesim.learning.data.cifar import CIFAR10_CLASSES
from edgesim.learning.data.dataset import Dataset, DatasetError, image_dataset
from edgesim.learning.data.files import existing_dir

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
        missing = [c for c in CIFAR10_CLASSES if not (folder / split / c).is_dir()]
        if missing:
            raise DatasetError(f"missing folders {', '.join(str(folder / split / c) for c in missing[:3])}"
                               f"{' ...' if len(missing) > 3 else ''}: expected CINIC-10's train/ and test/ with one "
                               f"folder per class under {root} or {root}/cinic-10")
        xs, ys = [], []
        for label, name in enumerate(CIFAR10_CLASSES):
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
    return image_dataset("cinic10", *splits["train"], *splits["test"], 10, CIFAR10_CLASSES, 255.0)
