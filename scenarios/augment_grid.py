"""A grid of real images under each augmentation: rows original, weak, strong, shift, flip.

Run from the repository root::

    python -m edgesim.scenarios.augment_grid --data-dir DIR --out docs/figures/augmentations.png

The images are the first ``--n`` test images of distinct classes (then any), read with the
project's own loader; augmentations are drawn from one seeded generator; pixels are shown
un-normalised (``x · std + mean``) on the [0, 1] grey scale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from edgesim.learning.augment import OP_NAMES, RandAugmentParams, make_augmentation
from edgesim.plots.style import figure_size, fs

ROWS = ("none", "weak", "strong", "shift", "flip")
ROW_LABELS = {"none": "original", "weak": "weak", "strong": "strong", "shift": "shift ±2 px", "flip": "flip"}
PAGE_WIDTH_IN = 7.0
LEVELLESS = ("AutoContrast", "Equalize", "Identity")


def pick_samples(y: np.ndarray, n: int) -> np.ndarray:
    """Indices of the first ``n`` samples, one per class while classes last, in order of appearance."""
    first = {}
    for i, label in enumerate(y.tolist()):
        first.setdefault(label, i)
    chosen = sorted(first.values())[:n]
    rest = [i for i in range(len(y)) if i not in set(chosen)]
    return np.array(sorted(chosen + rest[: n - len(chosen)]))


def applied_ops(params: RandAugmentParams) -> list[str]:
    """Per sample, the RandAugment ops that were applied, with their level where it matters,
    e.g. ``"Rotate 4, Equalize"``."""
    return [", ".join(OP_NAMES[op] + ("" if OP_NAMES[op] in LEVELLESS else f" {lv}")
                      for op, on, lv in zip(ops, applied, level) if on) or "no op"
            for ops, applied, level in zip(params.op_ids.tolist(), params.applied.tolist(), params.level.tolist())]


def augmented_rows(x: torch.Tensor, mean, std, seed: int = 0) -> tuple[dict[str, np.ndarray], list[str]]:
    """Each row of :data:`ROWS` applied to normalised images ``x`` (N, C, H, W), returned un-normalised
    to [0, 1] as ``(N, H, W, C)`` arrays, and the RandAugment ops of the strong row per sample."""
    shape = tuple(x.shape[1:])
    m = torch.tensor(mean, dtype=x.dtype).reshape(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).reshape(1, -1, 1, 1)
    out, ops = {}, []
    for name in ROWS:
        aug = make_augmentation(name, shape, mean, std)
        params = aug.draw(len(x), torch.Generator().manual_seed(seed))
        out[name] = (aug.apply(x, params) * s + m).clamp(0, 1).permute(0, 2, 3, 1).numpy()
        if name == "strong":
            ops = applied_ops(next(p for p in params.stages if isinstance(p, RandAugmentParams)))
    return out, ops


def draw_grid(rows: dict[str, np.ndarray], titles: list[str], out: Path, strong_ops: list[str] = ()) -> Path:
    """Save the grid (one row per augmentation, one column per sample) to ``out``; ``strong_ops``
    label the strong row's cells."""
    n_rows, n_cols = len(rows), len(titles)
    cell = PAGE_WIDTH_IN / (n_cols + 1.2)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=figure_size(PAGE_WIDTH_IN, cell * n_rows + 0.4), squeeze=False)
    for r, (name, images) in enumerate(rows.items()):
        for c in range(n_cols):
            ax = axes[r, c]
            img = images[c]
            ax.imshow(img[..., 0] if img.shape[-1] == 1 else img, cmap="gray", vmin=0, vmax=1,
                      interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(titles[c], fontsize=fs(7))
            if c == 0:
                ax.set_ylabel(ROW_LABELS.get(name, name), fontsize=fs(8))
            if name == "strong" and strong_ops:
                ax.set_xlabel(strong_ops[c].replace(", ", "\n"), fontsize=fs(5.5), labelpad=1.5)
    fig.tight_layout(pad=0.3)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=200)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgesim.scenarios.augment_grid", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="folder with the Fashion-MNIST IDX files")
    parser.add_argument("--dataset", default="fashion_mnist", help="data set name (default fashion_mnist)")
    parser.add_argument("--out", default="docs/figures/augmentations.png", help="PNG to write")
    parser.add_argument("--n", type=int, default=8, help="number of samples (columns), default 8")
    parser.add_argument("--seed", type=int, default=0, help="seed of the augmentation generator")
    args = parser.parse_args(argv)
    from edgesim.learning.data.datasets import DatasetError, load_dataset

    if args.n < 1:
        print(f"error: --n(={args.n}) must be >= 1", file=sys.stderr)
        return 2
    try:
        data = load_dataset(args.dataset, args.data_dir)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if data.kind != "image":
        print(f"error: --dataset {args.dataset!r} holds {data.kind}; expected images", file=sys.stderr)
        return 2
    idx = pick_samples(data.y_test, args.n)
    x = torch.from_numpy(data.x_test[idx])
    names = data.class_names or tuple(str(k) for k in range(data.n_classes))
    rows, strong_ops = augmented_rows(x, data.mean, data.std, args.seed)
    path = draw_grid(rows, [names[k] for k in data.y_test[idx]], Path(args.out), strong_ops)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
