"""A user's own images, one subfolder per class: ``dataset = "image_folder"``.

The layout every image tool writes (torchvision's ``ImageFolder``)::

    data_dir/cat/0001.png              data_dir/train/cat/0001.png
    data_dir/cat/0002.jpg      or      data_dir/train/dog/...
    data_dir/dog/...                   data_dir/test/cat/...   (``val/`` is read as ``test/``)

Classes are the subfolder names in sorted order (label 0 is the first, as
``ImageFolder``); files ending ``.png``, ``.jpg`` or ``.jpeg`` (any case) are read,
hidden files and other files are skipped. With ``train/`` and ``test/`` (or
``val/``) subfolders they are the two splits; without them each class's files
(sorted by name) are shuffled with a fixed generator (seed 0, independent of the
run seed, as the bundled digits' split) and ``[data] test_fraction`` of them
(default 0.2, at least one of a class with two or more images) are the test split.

Every image becomes grayscale (one channel) when every file is grayscale (PIL
modes ``1``, ``L``, ``LA``, ``I``, ``I;16``, ``F``), else RGB (three channels; an
alpha channel is dropped). ``[data] image_size = [H, W]`` resizes each image to
that shape (Pillow's bilinear filter, which widens its support when shrinking, so
it also anti-aliases); without it every image must already share one size.
Pixels are scaled by 1/255, then each channel normalised with the train split's
mean and std. What was read (the folder, the layout, the size, the channels, the
class names and counts, the normalisation) is recorded in ``summary.json`` under
``dataset``. A file that is not a readable image, an empty class folder, or sizes
that differ with no ``image_size`` raise :class:`DatasetError` naming the file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import Dataset, DatasetError, image_dataset
from edgesim.learning.data.files import existing_dir

EXTENSIONS = (".png", ".jpg", ".jpeg")
GRAY_MODES = ("1", "L", "LA", "I", "I;16", "F")
DEFAULT_TEST_FRACTION = 0.2
SPLIT_SEED = 0


def _classes(folder: Path) -> dict[str, list[Path]]:
    """Class name -> its image files (sorted), for the class subfolders of ``folder``."""
    classes = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = sorted(p for p in sub.iterdir()
                       if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in EXTENSIONS)
        if not files:
            raise DatasetError(f"{sub}: class folder holds no image; expected .png, .jpg or .jpeg files")
        classes[sub.name] = files
    if not classes:
        raise DatasetError(f"{folder}: holds no class subfolder; expected one folder of images per class "
                           "(data_dir/<class>/*.png), or train/ and test/ folders laid out so")
    return classes


def _split_folders(root: Path) -> tuple[Path, Path] | None:
    names = {p.name.lower(): p for p in root.iterdir() if p.is_dir()}
    test = names.get("test") or names.get("val")
    if "train" in names and test is not None:
        return names["train"], test
    if "train" in names or test is not None:  # one of the two: not class folders, and not a split either
        have, lack = ("train/", "test/ (or val/)") if "train" in names else (f"{test.name}/", "train/")
        raise DatasetError(f"{root}: holds a {have} folder but no {lack} folder; expected both (train/CLASS/IMAGE and "
                           f"test/CLASS/IMAGE), or class folders only (a share of each held out as the test split)")
    return None


def _held_out(classes: dict[str, list[Path]], fraction: float) -> tuple[dict, dict]:
    """Per class, ``round(fraction * n)`` files (at least one when n >= 2) drawn with seed 0 as the test split."""
    rng = np.random.default_rng(SPLIT_SEED)
    train, test = {}, {}
    for name, files in classes.items():
        order = rng.permutation(len(files))
        n_test = 0 if len(files) < 2 else min(len(files) - 1, max(1, round(fraction * len(files))))
        test[name] = [files[i] for i in sorted(order[:n_test])]
        train[name] = [files[i] for i in sorted(order[n_test:])]
    return train, test


def _open(path: Path):
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(path)
        image.load()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise DatasetError(f"{path}: not a readable image ({type(exc).__name__}: {exc}); expected a PNG or JPEG file") from None
    return image


def _mode(path: Path) -> str:
    """The PIL mode from the file's header (the pixels are decoded, and checked, by :func:`_open`)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.mode
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise DatasetError(f"{path}: not a readable image ({type(exc).__name__}: {exc}); expected a PNG or JPEG file") from None


def _pixels(files: list[Path], channels: int, size_hw: tuple[int, int] | None) -> tuple[np.ndarray, tuple[int, int]]:
    """uint8 ``(n, channels, H, W)``; every image resized to ``size_hw``, or all of one size when it is ``None``."""
    from PIL import Image

    out, first = [], None
    for path in files:
        image = _open(path).convert("L" if channels == 1 else "RGB")
        if size_hw is not None:
            if image.size != (size_hw[1], size_hw[0]):
                image = image.resize((size_hw[1], size_hw[0]), Image.Resampling.BILINEAR)
        else:
            first = first or (path, image.size)
            if image.size != first[1]:
                raise DatasetError(
                    f"{path}: {image.size[0]}x{image.size[1]} pixels (W x H) but {first[0]} is "
                    f"{first[1][0]}x{first[1][1]}; expected one size, or set data.image_size = [H, W] to resize")
        array = np.asarray(image, dtype=np.uint8)
        out.append(array[None] if channels == 1 else array.transpose(2, 0, 1))
    stacked = np.stack(out)
    return stacked, tuple(stacked.shape[2:])


def load_image_folder(data_dir, image_size=None, test_fraction=None) -> Dataset:
    """The images under ``data_dir`` (module docstring), resized to ``image_size = (H, W)`` when given."""
    root = existing_dir(data_dir, "the image_folder data set")
    split = _split_folders(root)
    fraction = DEFAULT_TEST_FRACTION if test_fraction is None else float(test_fraction)
    if split is not None:
        train, test = _classes(split[0]), _classes(split[1])
        unknown = sorted(set(test) - set(train))
        if unknown:
            raise DatasetError(f"{split[1]}: class folder(s) {', '.join(unknown)} have no counterpart in {split[0]}; "
                               "expected the test classes among the train classes")
        layout = f"{split[0].name}/ and {split[1].name}/ subfolders"
    else:
        train, test = _held_out(_classes(root), fraction)
        layout = f"class folders, {fraction:g} of each class held out as the test split (seed {SPLIT_SEED})"
    names = tuple(train)
    label = {name: k for k, name in enumerate(names)}
    train_files = [(f, label[c]) for c in names for f in train[c]]
    test_files = [(f, label[c]) for c in test for f in test[c]]
    if not test_files:
        raise DatasetError(f"{root}: no image left for the test split (each class holds one); expected at least two "
                           "images of some class, or a test/ folder")
    gray = all(_mode(f) in GRAY_MODES for f, _ in train_files + test_files)
    channels = 1 if gray else 3
    size = None if image_size is None else (int(image_size[0]), int(image_size[1]))
    x, shape = _pixels([f for f, _ in train_files + test_files], channels, size)
    x_train, x_test = x[:len(train_files)], x[len(train_files):]
    y_train = np.array([k for _, k in train_files], dtype=np.int64)
    y_test = np.array([k for _, k in test_files], dtype=np.int64)
    ds = image_dataset("image_folder", x_train, y_train, x_test, y_test, len(names), names, 255.0)
    source = {"format": "image_folder", "folder": str(root.resolve()), "layout": layout,
              "image_size": list(shape), "resized": size is not None, "resample": "bilinear" if size else None,
              "channels": channels, "color": "grayscale" if gray else "RGB"}
    return dataclasses.replace(ds, source=source)
