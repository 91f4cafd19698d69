"""Augmentations: shapes, determinism, grouping, and each operation's property on hand-made images."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from learning.augment import (
    AUGMENTATIONS,
    OP_NAMES,
    Crop,
    Flip,
    RandAugment,
    _op,
    concat_params,
    cutout,
    make_augmentation,
    op_level,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (1, 8, 8)])
@pytest.mark.parametrize("name", AUGMENTATIONS)
def test_shapes_dtypes_and_determinism(name, shape):
    a = make_augmentation(name, shape)
    x = torch.randn(6, *shape, generator=gen(1))
    y = a.apply(x, a.draw(6, gen(2)))
    assert y.shape == x.shape and y.dtype == x.dtype
    assert torch.equal(y, a.apply(x, a.draw(6, gen(2))))
    assert a.apply(x[:0], a.draw(0, gen(2))).shape == (0, *shape)


def test_draws_advance_the_generator_by_the_count_only():
    a = make_augmentation("strong", (3, 32, 32))
    g1, g2 = gen(5), gen(5)
    a.draw(7, g1)
    a.draw(7, g2)
    assert torch.equal(torch.rand(3, generator=g1), torch.rand(3, generator=g2))


@given(st.lists(st.integers(0, 6), min_size=1, max_size=4), st.sampled_from(["weak", "strong", "shift"]))
@settings(max_examples=25, deadline=None)
def test_grouping_does_not_change_anything(sizes, name):
    """Augmenting clients' rows together (params concatenated) equals augmenting each client alone.

    To float rounding: a batched convolution (sharpness) may pick another kernel for another batch size.
    """
    a = make_augmentation(name, (1, 12, 12))
    xs = [torch.randn(n, 1, 12, 12, generator=gen(n)) for n in sizes]
    ps = [a.draw(len(x), gen(10 + i)) for i, x in enumerate(xs)]
    together = a.apply(torch.cat(xs), concat_params(ps))
    alone = torch.cat([a.apply(x, p) for x, p in zip(xs, ps)])
    assert torch.allclose(together, alone, rtol=0, atol=1e-5)


def test_flip_twice_is_identity_and_flip_mirrors():
    x = torch.arange(2 * 3 * 4, dtype=torch.float32).view(2, 1, 3, 4)
    p = {"flip": torch.tensor([True, False])}
    y = Flip().apply(x, p)
    assert torch.equal(y[0], x[0].flip(-1)) and torch.equal(y[1], x[1])
    assert torch.equal(Flip().apply(y, p), x)


def test_crop_at_zero_offset_is_the_input_and_moves_a_pixel():
    x = torch.zeros(1, 1, 9, 9)
    x[0, 0, 4, 4] = 1.0
    c = Crop(3)
    assert torch.equal(c.apply(x, {"dy": torch.tensor([0]), "dx": torch.tensor([0])}), x)
    y = c.apply(x, {"dy": torch.tensor([2]), "dx": torch.tensor([-1])})
    assert float(y[0, 0, 6, 3]) == 1.0 and float(y.sum()) == 1.0  # moved down 2, left 1


def test_translate_moves_a_bright_pixel():
    x = torch.zeros(1, 1, 10, 10)
    x[0, 0, 5, 5] = 1.0
    # translate_x at v = 0.2 of the width: 2 pixels
    y = _op("translate_x", x, torch.tensor([0.2], dtype=torch.float64), torch.tensor([1.0]))
    (r, c) = torch.nonzero(y[0, 0] > 0.5)[0].tolist()
    assert r == 5 and abs(c - 5) == 2


def test_rotate_by_zero_is_identity_and_by_90_turns():
    x = torch.rand(2, 1, 8, 8, generator=gen(3))
    zero = _op("rotate", x, torch.zeros(2, dtype=torch.float64), torch.ones(2))
    assert torch.allclose(zero, x, atol=1e-6)
    quarter = _op("rotate", x, torch.full((2,), 90.0, dtype=torch.float64), torch.ones(2))
    assert torch.allclose(quarter, torch.rot90(x, 1, (-2, -1)), atol=1e-6) or \
        torch.allclose(quarter, torch.rot90(x, -1, (-2, -1)), atol=1e-6)


def test_photometric_operations_by_hand():
    x = torch.tensor([[0.0, 0.25], [0.5, 1.0]]).view(1, 1, 2, 2)
    one = torch.ones(1)
    # solarize at threshold 128/256: values >= 0.5 are inverted
    y = _op("solarize", x, torch.tensor([128.0]), one)
    assert torch.allclose(y.view(-1), torch.tensor([0.0, 0.25, 0.5, 0.0]))
    # posterize to 1 bit on 8-bit levels ⌊255·x⌋: 0, 63 -> 0; 153, 255 -> 128
    p = torch.tensor([[0.0, 0.25], [0.6, 1.0]]).view(1, 1, 2, 2)
    y = _op("posterize", p, torch.tensor([1.0]), one)
    assert torch.allclose(y.view(-1), torch.tensor([0.0, 0.0, 128 / 255, 128 / 255]))
    # brightness 0.5 halves; contrast 0 gives the mean grey
    assert torch.allclose(_op("brightness", x, torch.tensor([0.5]), one), x * 0.5)
    assert torch.allclose(_op("contrast", x, torch.tensor([0.0]), one), torch.full_like(x, 0.4375))
    # autocontrast stretches [0.2, 0.6] to [0, 1]; equalize spreads 4 distinct levels evenly
    z = torch.tensor([[0.2, 0.3], [0.4, 0.6]]).view(1, 1, 2, 2)
    assert torch.allclose(_op("autocontrast", z, torch.zeros(1), one).view(-1), torch.tensor([0.0, 0.25, 0.5, 1.0]))
    assert torch.allclose(_op("equalize", z, torch.zeros(1), one).view(-1), torch.tensor([0.0, 1 / 3, 2 / 3, 1.0]))
    flat = torch.full((1, 1, 2, 2), 0.3)
    assert torch.equal(_op("equalize", flat, torch.zeros(1), one), flat)
    assert torch.equal(_op("identity", x, torch.zeros(1), one), x)


def test_fixmatch_values_of_the_magnitudes():
    v = torch.tensor([1, 9])
    assert torch.allclose(op_level("brightness", v), torch.tensor([0.14, 0.86], dtype=torch.float64))
    assert op_level("posterize", v).tolist() == [4.0, 7.0]
    assert op_level("solarize", v).tolist() == [25.0, 230.0]
    assert torch.allclose(op_level("rotate", v), torch.tensor([3.0, 27.0], dtype=torch.float64))


def test_cutout_is_a_clipped_square():
    x = torch.zeros(2, 1, 10, 10)
    y = cutout(x, torch.tensor([[0.5, 0.5], [0.0, 0.95]]), 4, 0.5)
    assert int((y[0] == 0.5).sum()) == 16  # 4x4 inside
    assert torch.equal(y[0, 0, 3:7, 3:7], torch.full((4, 4), 0.5))
    # centre (0, 9): rows [0 − 2, 0 + 2) and columns [9 − 2, 9 + 2) clipped to rows [0, 2), columns [7, 10)
    assert int((y[1] == 0.5).sum()) == 6
    assert torch.equal(y[1, 0, 0:2, 7:10], torch.full((2, 3), 0.5))


def test_randaugment_picks_n_ops_from_the_pool_and_grayscale_drops_colour():
    gray = make_augmentation("strong", (1, 28, 28)).parts[-1]
    rgb = make_augmentation("strong", (3, 32, 32)).parts[-1]
    assert "color" not in gray.ops and len(gray.ops) == 13
    assert rgb.ops == OP_NAMES and len(rgb.ops) == 14
    assert rgb.cutout == 16 and gray.cutout == 14 and rgb.n_ops == 2
    p = RandAugment().draw(1000, gen(4))
    assert p["op"].shape == (1000, 2) and int(p["op"].max()) == 13 and int(p["op"].min()) == 0
    assert int(p["magnitude"].min()) == 1 and int(p["magnitude"].max()) == 9
    assert 0.45 < float(p["apply"].float().mean()) < 0.55


def test_strong_view_keeps_the_value_range_of_each_image():
    a = make_augmentation("strong", (3, 16, 16))
    x = torch.randn(20, 3, 16, 16, generator=gen(6)) * 2 + 1
    y = a.apply(x, a.draw(20, gen(7)))
    lo, hi = x.amin(dim=(1, 2, 3)), x.amax(dim=(1, 2, 3))
    assert torch.all(y.amin(dim=(1, 2, 3)) >= lo - 1e-5) and torch.all(y.amax(dim=(1, 2, 3)) <= hi + 1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="augmentation"):
        make_augmentation("mixup", (1, 28, 28))
    with pytest.raises(ValueError, match="images"):
        make_augmentation("weak", (64,))
    with pytest.raises(ValueError):
        RandAugment(ops=("warp",))
    with pytest.raises(ValueError, match="rows"):
        Flip().apply(torch.zeros(2, 1, 4, 4), {"flip": torch.tensor([True])})
