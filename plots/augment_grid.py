"""A grid of real images under each augmentation (docs/augmentations.md's figure).

    .venv/bin/python -m plots.augment_grid --data-dir ../shared/data --out docs/figures/augmentations.png

Rows: the original, then ``weak``, ``strong`` (two draws), ``shift`` and ``flip``
(``learning.augment``), each applied to the normalised images exactly as the
trainer does; images are shown un-normalised with the data set's mean and std.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch


def draw(dataset: str, data_dir: str, out: Path, n: int = 8, seed: int = 0) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from learning.augment import make_augmentation
    from learning.data.datasets import load_dataset

    ds = load_dataset(dataset, data_dir)
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(ds.y_test), size=n, replace=False)
    x = torch.as_tensor(ds.x_test[idx])
    shape = tuple(x.shape[1:])
    rows = [("original", x)]
    for label, name, s in (("weak", "weak", 1), ("strong", "strong", 2), ("strong (2nd draw)", "strong", 3),
                           ("shift", "shift", 4), ("flip", "flip", 5)):
        a = make_augmentation(name, shape)
        rows.append((label, a.apply(x, a.draw(n, torch.Generator().manual_seed(s)))))
    mean = torch.tensor(ds.mean).view(1, -1, 1, 1)
    std = torch.tensor(ds.std).view(1, -1, 1, 1)
    fig, axes = plt.subplots(len(rows), n, figsize=(n * 0.9, len(rows) * 0.95))
    for r, (label, imgs) in enumerate(rows):
        pix = (imgs * std + mean).clamp(0, 1)
        for c in range(n):
            ax = axes[r, c]
            img = pix[c].permute(1, 2, 0).numpy()
            ax.imshow(img[..., 0] if img.shape[-1] == 1 else img, cmap="gray" if img.shape[-1] == 1 else None,
                      vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
            if r == 0 and ds.class_names:
                ax.set_title(ds.class_names[int(ds.y_test[idx[c]])], fontsize=6)
    fig.suptitle(f"{ds.name}: test images under each augmentation (seeded draws)", fontsize=8)
    fig.tight_layout(rect=(0.06, 0, 1, 0.96))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)
    plt.close(fig)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="fashion_mnist")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--out", type=Path, default=Path("docs/figures/augmentations.png"))
    a = p.parse_args()
    print(draw(a.dataset, a.data_dir, a.out))


if __name__ == "__main__":
    main()
