"""Synthetic data: Gaussian class blobs as images, drawn from a seed (no files).
"""

from __future__ import annotations

import math

import numpy as np

from edgesim.learning.data.dataset import Dataset, image_dataset


def make_synthetic(n_train: int = 1000, n_test: int = 200, shape: tuple[int, ...] = (1, 8, 8),
                   n_classes: int = 10, seed: int = 0, noise_std: float = 1.0) -> Dataset:
    """Gaussian class blobs as images: ``x = prototype[y] + noise_std * N(0, I)``, prototypes ~ N(0, I).

    Labels are balanced (counts differ by at most one) and shuffled; the
    same arguments give the same arrays.  The options follow, one a line;

    ``n_train``: the number of training images drawn.
    ``n_test``: the number of test images drawn.
    ``shape``: each image's (channels, height, width).
    ``n_classes``: the number of classes, one Gaussian prototype each.
    ``seed``: the seed of the prototypes and the draws (not the run's seed).
    ``noise_std``: the standard deviation of the noise around each prototype (0: every image is its prototype).
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
