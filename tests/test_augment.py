"""Augmentations: hand-made images with exact expected pixels, determinism and group independence."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.learning.augment import (
    AUGMENTATIONS,
    COLOR_OP_ID,
    OP_NAMES,
    CutoutParams,
    Flip,
    FlipParams,
    RandAugmentMC,
    RandAugmentParams,
    SequentialParams,
    ShiftParams,
    apply_op,
    autocontrast,
    brightness,
    concat_params,
    contrast,
    cutout,
    equalize,
    float_magnitude,
    hflip,
    int_magnitude,
    make_augmentation,
    posterize,
    randaugment_pool,
    rotate,
    sharpness,
    shear,
    shift_images,
    solarize,
    translate,
    weak,
)

GREY = ((1, 28, 28), (0.2860,), (0.3530,))
RGB = ((3, 32, 32), (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
SMALL = ((2, 8, 8), (0.5, 0.5), (0.25, 0.25))


def build(name, spec):
    shape, mean, std = spec
    return make_augmentation(name, shape, mean, std)


def images(n, shape, seed=0, dtype=torch.float32):
    return torch.randn((n, *shape), generator=torch.Generator().manual_seed(seed), dtype=dtype)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def dot(h, w, i, j):
    x = torch.zeros(1, 1, h, w)
    x[0, 0, i, j] = 1.0
    return x


def where_one(x):
    return [tuple(p) for p in torch.nonzero(x[0, 0] == 1.0).tolist()]


# --------------------------------------------------------------------------
# Contract: shapes, dtypes, determinism, group independence


@pytest.mark.parametrize("spec", [GREY, RGB, SMALL])
@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shape_dtype_device_kept(name, spec, dtype):
    aug = build(name, spec)
    x = images(5, spec[0], dtype=dtype)
    out = aug.apply(x, aug.draw(5, gen(1)))
    assert out.shape == x.shape and out.dtype == dtype and out.device == x.device
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_same_generator_state_same_output_and_apply_is_pure(name):
    aug = build(name, RGB)
    x = images(16, RGB[0])
    g1, g2 = gen(7), gen(7)
    p1, p2 = aug.draw(16, g1), aug.draw(16, g2)
    assert torch.equal(aug.apply(x, p1), aug.apply(x, p2))
    state = g1.get_state()
    aug.apply(x, p1)
    assert torch.equal(g1.get_state(), state)  # apply never touches the generator
    assert torch.equal(g1.get_state(), g2.get_state())


@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_generator_advance_depends_on_n_only(name):
    """draw sees no data: n samples from a given state always land in the same state."""
    aug = build(name, GREY)
    g1, g2 = gen(3), gen(3)
    aug.draw(9, g1)
    aug.draw(9, g2)
    assert torch.equal(g1.get_state(), g2.get_state())
    assert not torch.equal(g1.get_state(), gen(3).get_state()) or name == "none"


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(0, 9), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1),
       name=st.sampled_from(sorted(AUGMENTATIONS)), spec=st.sampled_from([GREY, RGB]))
def test_concatenated_draws_equal_per_group_application(sizes, seed, name, spec):
    aug = build(name, spec)
    xs = [images(n, spec[0], seed=seed + i) for i, n in enumerate(sizes)]
    params = [aug.draw(len(x), gen(seed + 100 + i)) for i, x in enumerate(xs)]
    together = aug.apply(torch.cat(xs), concat_params(params))
    apart = torch.cat([aug.apply(x, p) for x, p in zip(xs, params)])
    assert torch.equal(together, apart)


def test_concat_params_rejects_mixed_kinds_and_empty():
    with pytest.raises(ValueError, match="different augmentations"):
        concat_params([FlipParams(torch.ones(1, dtype=torch.bool)), ShiftParams(torch.zeros(1), torch.zeros(1))])
    with pytest.raises(ValueError, match="empty"):
        concat_params([])


def test_apply_rejects_params_of_another_size():
    aug = build("flip", GREY)
    with pytest.raises(ValueError, match="params describe 3 samples but x has 2"):
        aug.apply(images(2, GREY[0]), aug.draw(3, gen(0)))


def test_make_augmentation_errors_are_one_line():
    with pytest.raises(ValueError, match="unknown augmentation 'blur'; expected one of: none, weak, strong"):
        make_augmentation("blur", (1, 28, 28))
    with pytest.raises(ValueError, match="needs the data set's per-channel mean and std"):
        make_augmentation("strong", (1, 28, 28))
    with pytest.raises(ValueError, match="H, W >= 8"):
        make_augmentation("weak", (1, 4, 4))
    with pytest.raises(ValueError, match="mean"):
        make_augmentation("strong", (3, 32, 32), mean=(0.5,), std=(0.2,))


# --------------------------------------------------------------------------
# Flip, shift, crop


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 9), st.integers(0, 1000))
def test_flip_twice_is_identity(c, h, w, seed):
    x = torch.randn(2, c, h, w, generator=gen(seed))
    assert torch.equal(hflip(hflip(x)), x)
    assert torch.equal(hflip(x)[..., 0], x[..., -1])


def test_flip_augmentation_flips_every_sample_and_weak_about_half():
    x = images(4, GREY[0])
    assert torch.equal(build("flip", GREY).apply(x, build("flip", GREY).draw(4, gen(0))), hflip(x))
    flips = Flip(0.5).draw(4000, gen(0)).flip.float().mean().item()
    assert 0.45 < flips < 0.55


def test_shift_reflect_and_zero_fill_by_hand():
    row = torch.arange(4.0).reshape(1, 1, 1, 4)
    one, zero = torch.tensor([1]), torch.tensor([0])
    assert shift_images(row, zero, one, reflect=True).flatten().tolist() == [1, 0, 1, 2]
    assert shift_images(row, zero, -one, reflect=True).flatten().tolist() == [1, 2, 3, 2]
    assert shift_images(row, zero, 2 * one, reflect=False).flatten().tolist() == [0, 0, 0, 1]


def test_crop_with_zero_offset_is_the_input():
    x = images(3, RGB[0])
    aug = weak(RGB[0])
    none = SequentialParams((FlipParams(torch.zeros(3, dtype=torch.bool)),
                             ShiftParams(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long))))
    assert torch.equal(aug.apply(x, none), x)


@pytest.mark.parametrize("shape, pad", [((3, 32, 32), 4), ((1, 28, 28), 3), ((1, 8, 8), 1)])
def test_weak_crop_pad_by_image_size(shape, pad):
    params = weak(shape).draw(3000, gen(0))
    dy = params.stages[1].dy
    assert dy.min().item() == -pad and dy.max().item() == pad


def test_fedmix_shift_is_within_two_pixels_both_ways():
    p = build("shift", GREY).draw(2000, gen(0))
    assert set(p.dy.tolist()) == set(range(-2, 3)) and set(p.dx.tolist()) == set(range(-2, 3))


# --------------------------------------------------------------------------
# Geometric ops


@pytest.mark.parametrize("k", [-3, 1, 2])
def test_translate_moves_a_bright_pixel_by_k(k):
    x = dot(10, 12, 4, 5)
    zero = torch.tensor([0])
    assert where_one(translate(x, zero, torch.tensor([k]))) == [(4, 5 + k)]
    assert where_one(translate(x, torch.tensor([k]), zero)) == [(4 + k, 5)]


def test_translate_op_pixels_follow_fixmatch_magnitude():
    """TranslateX at level v moves int(0.03 v · W) px: level 3 at W = 32 is int(2.88) = 2 px."""
    x = dot(32, 32, 10, 10)
    out = apply_op(OP_NAMES.index("TranslateX"), x, torch.tensor([3]), torch.tensor([1]))
    assert where_one(out) == [(10, 12)]
    out = apply_op(OP_NAMES.index("TranslateY"), x, torch.tensor([9]), torch.tensor([-1]))
    assert where_one(out) == [(10 - 8, 10)]


def test_rotate_zero_is_identity_and_quarter_turn_is_counter_clockwise():
    x = images(3, RGB[0])
    assert torch.allclose(rotate(x, torch.zeros(3)), x, atol=1e-6, rtol=0)
    # 8x8, centre (4, 4): pixel centre (x, y) = (6.5, 2.5) is offset (2.5, -1.5); a quarter turn
    # counter-clockwise (y down) sends (dx, dy) to (dy, -dx) = (-1.5, -2.5) -> pixel (row 1, col 2).
    assert where_one(rotate(dot(8, 8, 2, 6), torch.tensor([90.0]))) == [(1, 2)]


def test_shear_x_by_hand():
    """Output (x, y) samples input (x + v y, y) in pixel-centre coordinates: with v = 0.2 on row 4
    (y = 4.5) the shift is 0.9 px, so the pixel at column 5 shows up at column 4."""
    assert where_one(shear(dot(8, 8, 4, 5), torch.tensor([0.2]), "x")) == [(4, 4)]
    assert torch.equal(shear(dot(8, 8, 4, 5), torch.tensor([0.0]), "y"), dot(8, 8, 4, 5))


# --------------------------------------------------------------------------
# Photometric ops on [0, 1] pixels


def levels(*values):
    return torch.tensor(values, dtype=torch.float32).reshape(1, 1, 1, -1) / 255


def as_levels(x):
    return torch.round(x * 255).flatten().long().tolist()


def test_identity_op_is_the_input():
    x = torch.rand(4, 3, 9, 9, generator=gen(0))
    assert torch.equal(apply_op(OP_NAMES.index("Identity"), x, torch.ones(4, dtype=torch.long), torch.ones(4)), x)


def test_solarize_inverts_levels_at_or_above_threshold():
    x = levels(0, 100, 127, 128, 200, 255)
    assert as_levels(solarize(x, torch.tensor([128]))) == [0, 100, 127, 127, 55, 0]


def test_posterize_keeps_top_bits():
    x = levels(200, 15, 255, 16)
    assert as_levels(posterize(x, torch.tensor([4]))) == [192, 0, 240, 16]
    assert as_levels(posterize(x, torch.tensor([8]))) == [200, 15, 255, 16]


def test_equalize_by_hand():
    """512 pixels: 128 at level 0, 256 at 100, 128 at 200. step = (512 − 128) // 255 = 1;
    lut[i] = pixels below level i: lut[0] = 0, lut[100] = 128, lut[200] = min(384, 255) = 255."""
    x = torch.cat([torch.zeros(128), torch.full((256,), 100.0), torch.full((128,), 200.0)]) / 255
    out = equalize(x.reshape(1, 1, 16, 32))
    assert sorted(set(as_levels(out))) == [0, 128, 255]
    assert as_levels(out)[:1] + as_levels(out)[128:129] + as_levels(out)[-1:] == [0, 128, 255]


def test_equalize_leaves_small_or_flat_images_alone():
    x = torch.rand(2, 1, 8, 8, generator=gen(0))  # 64 pixels: step = 0
    assert torch.allclose(equalize(x), torch.round(x * 255) / 255)


def test_autocontrast_stretches_each_channel_and_keeps_flat_ones():
    x = torch.stack([torch.tensor([[0.2, 0.4, 0.6]]), torch.full((1, 3), 0.3)])[None]
    out = autocontrast(x)
    assert torch.allclose(out[0, 0], torch.tensor([[0.0, 0.5, 1.0]]))
    assert torch.equal(out[0, 1], x[0, 1])


def test_blends_by_hand():
    x = torch.tensor([0.0, 1.0, 0.0, 1.0]).reshape(1, 1, 2, 2)
    assert torch.allclose(brightness(x, torch.tensor([0.5])).flatten(), torch.tensor([0, 0.5, 0, 0.5]))
    grey = 128 / 255  # mean level 127.5 rounds up to 128
    expected = torch.tensor([grey / 2, (grey + 1) / 2] * 2)
    assert torch.allclose(contrast(x, torch.tensor([0.5])).flatten(), expected)
    flat = torch.full((1, 3, 5, 5), 0.4)
    assert torch.allclose(sharpness(flat, torch.tensor([0.1])), flat)


def test_magnitudes_follow_fixmatch_parameters():
    v = torch.arange(1, 10)
    assert int_magnitude(v, 256, 0).tolist() == [25, 51, 76, 102, 128, 153, 179, 204, 230]  # solarize 256 − these
    assert int_magnitude(v, 4, 4).tolist() == [4, 4, 5, 5, 6, 6, 6, 7, 7]  # posterize bits
    assert int_magnitude(v, 30, 0).tolist() == [3 * k for k in range(1, 10)]  # rotate degrees
    assert torch.allclose(float_magnitude(v, 0.9, 0.05), 0.09 * v.double() + 0.05)


# --------------------------------------------------------------------------
# Cutout


@pytest.mark.parametrize("cy, cx, rows, cols", [(5, 5, (3, 7), (3, 7)), (0, 0, (0, 2), (0, 2)),
                                                (9, 9, (7, 10), (7, 10)), (1, 8, (0, 3), (6, 10))])
def test_cutout_zeroes_exactly_a_clipped_square(cy, cx, rows, cols):
    out = cutout(torch.ones(1, 2, 10, 10), torch.tensor([cy]), torch.tensor([cx]), 4, 0.0)
    expected = torch.ones(1, 2, 10, 10)
    expected[..., rows[0]:rows[1], cols[0]:cols[1]] = 0.0
    assert torch.equal(out, expected)


def test_strong_cutout_is_fixmatch_grey_and_default_size_by_image():
    mean, std = GREY[1][0], GREY[2][0]
    aug = build("strong", GREY)
    cut = aug.stages[-1]
    assert cut.size == 14 and build("strong", RGB).stages[-1].size == 16
    assert cut.fill[0] == pytest.approx((127 / 255 - mean) / std)
    out = cut.apply(torch.zeros(1, 1, 28, 28), CutoutParams(torch.tensor([14]), torch.tensor([14])))
    assert ((out * std + mean - 127 / 255).abs() < 1e-6).sum().item() == 14 * 14


# --------------------------------------------------------------------------
# RandAugment


def test_randaugment_picks_n_ops_per_sample_from_the_pool():
    aug = build("strong", RGB)
    ra = aug.stages[2]
    p = ra.draw(3000, gen(0))
    assert p.op_ids.shape == (3000, 2) and p.level.shape == (3000, 2)
    assert set(p.op_ids.flatten().tolist()) == set(range(14))
    assert set(p.level.flatten().tolist()) == set(range(1, 10))
    assert 0.45 < p.applied.float().mean().item() < 0.55
    assert set(p.sign.flatten().tolist()) == {-1, 1}


def test_grayscale_drops_color():
    assert COLOR_OP_ID not in randaugment_pool(1) and len(randaugment_pool(1)) == 13
    assert randaugment_pool(3) == tuple(range(14))
    p = build("strong", GREY).stages[2].draw(3000, gen(0))
    assert COLOR_OP_ID not in p.op_ids.flatten().tolist()


def test_randaugment_applies_the_chosen_op_to_each_sample():
    """Two samples, one slot: sample 0 gets Solarize at level 5 (threshold 128), sample 1 is skipped."""
    ra = RandAugmentMC(mean=(0.0,), std=(1.0,), n_ops=1)
    x = levels(0, 100, 200, 255).expand(2, 1, 1, 4).clone()
    p = RandAugmentParams(op_ids=torch.tensor([[11], [11]]), applied=torch.tensor([[True], [False]]),
                          level=torch.tensor([[5], [5]]), sign=torch.tensor([[1], [1]]))
    out = ra.apply(x, p)
    assert as_levels(out[0]) == [0, 100, 55, 0] and torch.equal(out[1], x[1])


def test_randaugment_identity_only_pool_returns_input():
    ra = RandAugmentMC(mean=RGB[1], std=RGB[2], pool=(OP_NAMES.index("Identity"),))
    x = (torch.rand(6, 3, 32, 32, generator=gen(0)) - torch.tensor(RGB[1]).reshape(1, 3, 1, 1)) \
        / torch.tensor(RGB[2]).reshape(1, 3, 1, 1)
    assert torch.allclose(ra.apply(x, ra.draw(6, gen(1))), x, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("spec", [GREY, RGB])
@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_cuda_matches_cpu_and_groups_exactly(name, spec):
    aug = build(name, spec)
    x = images(64, spec[0])
    p = aug.draw(64, gen(0))
    cpu, cuda = aug.apply(x, p), aug.apply(x.cuda(), p)
    assert cuda.device.type == "cuda"
    # nearest-neighbour and 8-bit-level ties may round differently on the two devices (seen: < 0.5 %
    # of the pixels on an H100); on one device any grouping gives the same bits
    assert (cpu - cuda.cpu()).abs().gt(1e-4).float().mean().item() < 1e-2
    parts = [aug.draw(n, gen(10 + n)) for n in (3, 20, 41)]
    whole = aug.apply(x.cuda(), concat_params(parts))
    assert torch.equal(whole, torch.cat([aug.apply(xp.cuda(), pp) for xp, pp in zip(x.split([3, 20, 41]), parts)]))


# --------------------------------------------------------------------------
# The figure script


def test_augment_grid_draws_every_row(tmp_path):
    from edgesim.scenarios.augment_grid import ROWS, augmented_rows, draw_grid, pick_samples

    assert pick_samples(torch.tensor([3, 3, 1, 3, 2]).numpy(), 4).tolist() == [0, 1, 2, 4]
    x = images(3, GREY[0])
    rows, ops = augmented_rows(x, GREY[1], GREY[2], seed=0)
    assert list(rows) == list(ROWS) and all(r.shape == (3, 28, 28, 1) for r in rows.values())
    assert all(0.0 <= r.min() and r.max() <= 1.0 for r in rows.values()) and len(ops) == 3
    out = draw_grid(rows, ["a", "b", "c"], tmp_path / "grid.png", ops)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_augment_grid_bad_data_dir_is_one_line(tmp_path, capsys):
    from edgesim.scenarios.augment_grid import main

    assert main(["--data-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "g.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and not (tmp_path / "g.png").exists()


def test_strong_treats_a_zero_std_channel_as_only_centred():
    """The loader leaves a constant channel centred but unscaled (std 0 recorded): strong uses std 1 there."""
    aug = make_augmentation("strong", (2, 8, 8), mean=(0.5, 0.25), std=(0.0, 0.5))
    assert aug.stages[2].std == (1.0, 0.5)


def test_affine_grid_matches_torch():
    theta = torch.randn(5, 2, 3, generator=gen(0))
    from edgesim.learning.augment import affine_grid

    expected = torch.nn.functional.affine_grid(theta, [5, 1, 7, 9], align_corners=False)
    assert torch.allclose(affine_grid(theta, 7, 9), expected, atol=1e-6)


def test_contrast_uses_pils_rounded_mean_grey_level():
    """Levels 0 and 101 half each: mean 50.5 rounds to 51; factor 0 gives the flat grey 51/255."""
    x = (torch.tensor([0.0, 101.0]).repeat(8) / 255).reshape(1, 1, 4, 4)
    assert as_levels(contrast(x, torch.tensor([0.0]))) == [51] * 16


@pytest.mark.parametrize("build_bad, message", [
    (lambda: RandAugmentMC(mean=(0.5,), std=(0.2,), magnitude=11), r"RandAugment m .* must be an integer in \[2, 10\]"),
    (lambda: RandAugmentMC(mean=(0.5,), std=(0.2,), n_ops=0), r"RandAugment n\(=0\) must be an integer >= 1"),
    (lambda: Flip(1.5), r"flip probability p\(=1.5\) must be in \[0, 1\]"),
])
def test_bad_parameters_are_refused(build_bad, message):
    with pytest.raises(ValueError, match=message):
        build_bad()


# --------------------------------------------------------------------------
# Label-preserving views: a data set says whether a mirror keeps its labels


def test_the_data_sets_say_whether_a_mirror_keeps_their_labels():
    from edgesim.learning.data.datasets import DATASETS

    flips = {name: DATASETS.lookup(name).hflip_preserves_labels for name in DATASETS.names}
    assert not flips["mnist"] and not flips["digits"] and not flips["synthetic"] and not flips["organamnist"]
    assert flips["fashion_mnist"] and flips["cifar10"] and flips["cifar100"] and flips["pathmnist"]


def _left_heavy(n, shape):
    """Images bright on their left 10 columns, dark elsewhere: a mirror puts the bright block on the right."""
    x = torch.full((n, *shape), -1.0)
    x[..., :10] = 1.0
    return x


def _mirrored(out):
    half = out.shape[-1] // 2
    return out[..., half:].mean((1, 2, 3)) > out[..., :half].mean((1, 2, 3))


@pytest.mark.parametrize("dataset", ["mnist", "digits"])
def test_weak_never_mirrors_a_digit_batch(dataset):
    from edgesim.learning.data.datasets import DATASETS

    shape = (1, 28, 28) if dataset == "mnist" else (1, 8, 8)
    aug = make_augmentation("weak", shape, hflip=DATASETS.lookup(dataset).hflip_preserves_labels)
    params = aug.draw(2000, gen(3))
    assert not any(isinstance(p, FlipParams) for p in params.stages)
    x = torch.where(torch.arange(shape[-1]) < shape[-1] // 3, 1.0, -1.0).expand(2000, *shape)  # bright left third
    assert not _mirrored(aug.apply(x, params)).any()


@pytest.mark.parametrize("dataset", ["mnist", "digits"])
def test_strong_never_mirrors_a_digit_batch(dataset):
    """``strong`` on a digit data set is exactly ``strong`` with every flip drawn False: nothing else mirrors."""
    from edgesim.learning.data.datasets import DATASETS

    shape = (1, 28, 28) if dataset == "mnist" else (1, 8, 8)
    flips = DATASETS.lookup(dataset).hflip_preserves_labels
    no_flip = make_augmentation("strong", shape, (0.3,), (0.35,), hflip=flips)
    with_flip = make_augmentation("strong", shape, (0.3,), (0.35,), hflip=True)
    n, x = 400, images(400, shape)
    drawn = with_flip.draw(n, gen(5))
    assert isinstance(drawn.stages[0], FlipParams) and drawn.stages[0].flip.any()
    never = SequentialParams((FlipParams(torch.zeros(n, dtype=torch.bool)),) + drawn.stages[1:])
    mine = SequentialParams(drawn.stages[1:])
    assert not any(isinstance(p, FlipParams) for p in no_flip.draw(n, gen(5)).stages)
    assert torch.equal(no_flip.apply(x, mine), with_flip.apply(x, never))


def test_fashion_mnist_is_still_mirrored_half_the_time():
    from edgesim.learning.data.datasets import DATASETS

    hflip_ok = DATASETS.lookup("fashion_mnist").hflip_preserves_labels
    for name in ("weak", "strong"):
        aug = make_augmentation(name, GREY[0], GREY[1], GREY[2], hflip=hflip_ok)
        params = aug.draw(4000, gen(0))
        assert isinstance(params.stages[0], FlipParams)
        rate = params.stages[0].flip.float().mean().item()
        assert abs(rate - 0.5) < 4 * (0.25 / 4000) ** 0.5  # four binomial standard deviations
    weak_view = make_augmentation("weak", GREY[0], hflip=hflip_ok)
    params = weak_view.draw(4000, gen(1))
    seen = _mirrored(weak_view.apply(_left_heavy(4000, GREY[0]), params))
    assert torch.equal(seen, params.stages[0].flip)  # every drawn flip mirrors its image, no other does


def test_fedmix_flip_on_digits_is_the_shift():
    assert build("flip", GREY) == Flip(1.0)
    sub = make_augmentation("flip", GREY[0], hflip=False)
    assert sub == make_augmentation("shift", GREY[0])


def test_hflip_must_be_a_bool():
    with pytest.raises(ValueError, match=r"augmentation 'weak': hflip\(='no'\) must be True or False"):
        make_augmentation("weak", GREY[0], hflip="no")
