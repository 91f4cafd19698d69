"""The RandAugment ops against PIL, the library FixMatch's reference pool calls, on random 8-bit images.

Pillow comes with matplotlib; the file skips itself where it is missing. PIL works on 8-bit
integers and rounds after every step while our ops stay in float, so the photometric blends may
differ by a level or two; level-based ops (equalize, posterize, solarize) and integer
translations must match exactly; nearest-neighbour warps may differ where a sample point lies
on a tie between two pixels.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesim.learning.augment import (
    autocontrast,
    brightness,
    color,
    contrast,
    equalize,
    posterize,
    rotate,
    sharpness,
    shear,
    solarize,
    translate,
)

PIL = pytest.importorskip("PIL")
from PIL import Image, ImageEnhance, ImageOps  # noqa: E402 - after importorskip: the module skips without Pillow


def pil_images(mode: str, n: int = 6, size: int = 32, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = (size, size, 3) if mode == "RGB" else (size, size)
    # smooth-ish content (blocky) so that the ops see real structure, plus noise
    base = rng.integers(0, 256, size=(n, size // 4, size // 4) + shape[2:]).repeat(4, 1).repeat(4, 2)
    noise = rng.integers(-20, 21, size=(n,) + shape)
    arrays = np.clip(base + noise, 0, 255).astype(np.uint8)
    return [Image.fromarray(a, mode) for a in arrays]


def to_tensor(imgs) -> torch.Tensor:
    arrays = [np.asarray(img, dtype=np.float32) / 255 for img in imgs]
    x = torch.from_numpy(np.stack(arrays))
    return x[:, None] if x.dim() == 3 else x.permute(0, 3, 1, 2)


def levels_diff(ours: torch.Tensor, theirs) -> torch.Tensor:
    return (torch.round(ours * 255) - torch.round(to_tensor(theirs) * 255)).abs()


MODES = ["RGB", "L"]


@pytest.mark.parametrize("mode", MODES)
def test_level_ops_match_pil_exactly(mode):
    imgs = pil_images(mode)
    x = to_tensor(imgs)
    n = len(imgs)
    assert levels_diff(equalize(x), [ImageOps.equalize(i) for i in imgs]).max() == 0
    assert levels_diff(posterize(x, torch.full((n,), 5)), [ImageOps.posterize(i, 5) for i in imgs]).max() == 0
    assert levels_diff(solarize(x, torch.full((n,), 100)), [ImageOps.solarize(i, 100) for i in imgs]).max() == 0
    assert levels_diff(autocontrast(x), [ImageOps.autocontrast(i) for i in imgs]).max() <= 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("factor", [0.14, 0.5, 0.86])
def test_blends_match_pil_within_two_levels(mode, factor):
    imgs = pil_images(mode, seed=1)
    x = to_tensor(imgs)
    f = torch.full((len(imgs),), factor)
    ops = [(brightness, ImageEnhance.Brightness), (contrast, ImageEnhance.Contrast),
           (sharpness, ImageEnhance.Sharpness)]
    if mode == "RGB":
        ops.append((color, ImageEnhance.Color))
    for ours, theirs in ops:
        assert levels_diff(ours(x, f), [theirs(i).enhance(factor) for i in imgs]).max() <= 2, ours.__name__


@pytest.mark.parametrize("mode", MODES)
def test_integer_translation_matches_pil_affine_exactly(mode):
    """FixMatch's TranslateX(v) is PIL affine (1, 0, v, 0, 1, 0): the content moves by −v."""
    imgs = pil_images(mode, seed=2)
    x = to_tensor(imgs)
    n, zero = len(imgs), torch.zeros(len(imgs), dtype=torch.long)
    for v in (-5, 3):
        pil_x = [i.transform(i.size, Image.AFFINE, (1, 0, v, 0, 1, 0)) for i in imgs]
        pil_y = [i.transform(i.size, Image.AFFINE, (1, 0, 0, 0, 1, v)) for i in imgs]
        assert levels_diff(translate(x, zero, torch.full((n,), -v)), pil_x).max() == 0
        assert levels_diff(translate(x, torch.full((n,), -v), zero), pil_y).max() == 0


@pytest.mark.parametrize("mode", MODES)
def test_rotation_and_shear_match_pil_nearest(mode):
    """Same warp, same nearest-neighbour sampling; rotations may differ at a few near-tie pixels."""
    imgs = pil_images(mode, seed=3)
    x = to_tensor(imgs)
    n = len(imgs)
    for deg in (-27, 9, 90):
        diff = levels_diff(rotate(x, torch.full((n,), float(deg))), [i.rotate(deg) for i in imgs])
        assert (diff > 0).float().mean().item() < 0.01, deg
    for v in (-0.27, -0.09, 0.15):  # tie-free at 32 px (see affine_pixels)
        diff_x = levels_diff(shear(x, torch.full((n,), v), "x"),
                             [i.transform(i.size, Image.AFFINE, (1, v, 0, 0, 1, 0)) for i in imgs])
        diff_y = levels_diff(shear(x, torch.full((n,), v), "y"),
                             [i.transform(i.size, Image.AFFINE, (1, 0, 0, v, 1, 0)) for i in imgs])
        assert diff_x.max() == 0 and diff_y.max() == 0, v
