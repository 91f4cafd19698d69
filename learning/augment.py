"""Batched, seed-driven image augmentations: FixMatch/FedDure weak and strong views, FedMix perturbations.

Every augmentation splits into two halves:

* ``draw(n, generator)`` takes all the randomness for ``n`` samples from a CPU
  ``torch.Generator`` and returns it as a small frozen dataclass of CPU tensors
  with leading dimension ``n``. How far the generator advances depends on ``n``
  only, never on the data.
* ``apply(x, params)`` is deterministic and batched over ``x`` of shape
  ``(N, C, H, W)`` on ``x``'s device (params are moved there): no Python loop
  over samples, and no sample influences another. Hence
  ``apply(cat(xs), concat_params(ps)) == cat(apply(x, p) for x, p in zip(xs, ps))``
  exactly, which lets a trainer draw per client from that client's own
  generator and augment the whole concatenated batch at once.

What is implemented (``docs/model/augmentations.md`` gives the details and every
choice the sources leave open):

* ``weak`` — FixMatch's weak view (Sohn et al., "FixMatch: Simplifying
  Semi-Supervised Learning with Consistency and Confidence", NeurIPS 2020,
  §2.3): horizontal flip with probability 1/2, then a random crop of the
  reflect-padded image. A reflect-pad-``p`` crop is the same as shifting the
  content by a uniform integer in ``[-p, p]`` per axis with reflected borders,
  which is how it is computed. ``p = int(0.125 · min(H, W))``: 4 px at 32×32,
  3 px at 28×28. On a data set whose labels a mirror changes (digits, MNIST,
  OrganMNIST's left/right organs: ``DatasetSpec.hflip_preserves_labels``) the
  flip is left out and the crop alone remains — FixMatch's choice for SVHN.
* ``strong`` — weak, then RandAugment as in FixMatch's PyTorch reference
  ("RandAugmentMC"): pick ``n = 2`` ops uniformly with replacement from the
  14-op pool, apply each with probability 1/2 at an integer level ``v``
  uniform in ``{1, …, m − 1}`` (``m = 10``), then Cutout of ``min(H, W) // 2``
  px (16 at 32×32, 14 at 28×28). The FedDure paper (Bai et al., "Combating
  Data Imbalances in Federated Semi-supervised Learning with Dual
  Regulators", AAAI 2024) uses exactly this pipeline in its released code.
  The photometric ops are defined on pixels in ``[0, 1]``, so the images are
  un-normalised with the caller's per-channel mean/std, transformed, clipped
  to ``[0, 1]`` and normalised again.
* ``shift`` and ``flip`` — FedMix's two perturbations π and π' (Zhang et al.,
  "Improving Semi-supervised Federated Learning by Reducing the Gradient
  Diversity of Models", arXiv 2110.13388, Eq. 7–8): an integer shift of up to
  ±2 px per axis, and a horizontal flip (always, so the flipped copy is never
  the original). Where a mirror changes labels, FedMix's views are the shift
  alone (π' dropped from the flip∘shift view) and ``flip`` stands in as π.
* ``none`` — the identity.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------
# Parameters: frozen dataclasses whose leaves are tensors with leading dim n


def concat_params(params_list: Sequence):
    """Concatenate the params of several draws of the same augmentation along dim 0."""
    params_list = list(params_list)
    if not params_list:
        raise ValueError("concat_params needs at least one params object; got an empty list")
    first = params_list[0]
    if any(type(p) is not type(first) for p in params_list):
        kinds = sorted({type(p).__name__ for p in params_list})
        raise ValueError(f"concat_params got params of different augmentations ({', '.join(kinds)}); expected one kind")
    return _map_leaves(lambda *leaves: torch.cat(leaves, dim=0), *params_list)


def params_to(params, device: torch.device):
    """The same params with every tensor on ``device``; to a GPU through pinned memory without blocking
    (the trainer draws parameters every step: no host synchronisation for them)."""
    device = torch.device(device)
    if device.type == "cuda":
        return _map_leaves(lambda t: t.pin_memory().to(device, non_blocking=True) if t.device.type == "cpu"
                           else t.to(device), params)
    return _map_leaves(lambda t: t.to(device), params)


def params_len(params) -> int:
    """Number of samples the params describe (the common leading dimension)."""
    return len(_leaves(params)[0])


def _map_leaves(fn: Callable, *trees):
    first = trees[0]
    if isinstance(first, torch.Tensor):
        return fn(*trees)
    if isinstance(first, tuple):
        return tuple(_map_leaves(fn, *parts) for parts in zip(*trees))
    if dataclasses.is_dataclass(first):
        return type(first)(**{f.name: _map_leaves(fn, *(getattr(t, f.name) for t in trees))
                              for f in dataclasses.fields(first)})
    raise TypeError(f"params leaf of type {type(first).__name__}; expected a tensor, tuple or dataclass")


def _leaves(tree) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    _map_leaves(out.append, tree)
    return out


@dataclass(frozen=True)
class IdentityParams:
    """``present``: bool ``(n,)``, all True; it only carries ``n``."""
    present: torch.Tensor


@dataclass(frozen=True)
class FlipParams:
    """``flip``: bool ``(n,)``, True where the sample is mirrored left–right."""
    flip: torch.Tensor


@dataclass(frozen=True)
class ShiftParams:
    """``dy``, ``dx``: int64 ``(n,)``, displacement of the content in px (down, right positive)."""
    dy: torch.Tensor
    dx: torch.Tensor


@dataclass(frozen=True)
class RandAugmentParams:
    """Per sample and slot ``(n, k)``: pool ``op_ids`` (see :data:`OP_NAMES`), whether the op is
    ``applied``, its integer ``level`` in ``[1, m)`` and its ``sign`` (±1, used by the geometric ops)."""
    op_ids: torch.Tensor
    applied: torch.Tensor
    level: torch.Tensor
    sign: torch.Tensor


@dataclass(frozen=True)
class CutoutParams:
    """``cy``, ``cx``: int64 ``(n,)``, centre pixel of the square."""
    cy: torch.Tensor
    cx: torch.Tensor


@dataclass(frozen=True)
class SequentialParams:
    """The params of each stage of a :class:`Sequential`, in order."""
    stages: tuple


class Augmentation(Protocol):
    def draw(self, n: int, generator: torch.Generator): ...

    def apply(self, x: torch.Tensor, params) -> torch.Tensor: ...


def _check_int(what: str, value, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{what}(={value!r}) must be an integer {bound}")


def _check_n(n) -> None:
    _check_int("n", n, 0)


def _prepare(x: torch.Tensor, params):
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor (N, C, H, W); got "
                         f"{getattr(x, 'dtype', type(x).__name__)} with shape {tuple(getattr(x, 'shape', ()))}")
    if params_len(params) != len(x):
        raise ValueError(f"params describe {params_len(params)} samples but x has {len(x)}")
    return params_to(params, x.device)


# --------------------------------------------------------------------------
# Pure image operations. Batched over dim 0; per-sample arguments are (N,) tensors.


def hflip(x: torch.Tensor) -> torch.Tensor:
    """Mirror every image left–right: ``out[..., j] = x[..., W-1-j]``."""
    return x.flip(-1)


def _source_index(out_idx: torch.Tensor, shift: torch.Tensor, size: int, reflect: bool):
    """Source index ``i - shift`` per sample ``(N, size)``, reflected at the borders (no edge repeat)
    or flagged invalid (for constant fill)."""
    src = out_idx[None, :] - shift[:, None]
    valid = (src >= 0) & (src < size)
    if reflect:
        period = 2 * (size - 1)
        src = torch.remainder(src, period) if period else torch.zeros_like(src)
        src = torch.where(src >= size, period - src, src)
    return src.clamp(0, size - 1), valid


def shift_images(x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, reflect: bool = True,
                 fill: float = 0.0) -> torch.Tensor:
    """Move each image's content by ``(dy, dx)`` integer px (down, right positive).

    ``out[n, c, i, j] = x[n, c, i - dy_n, j - dx_n]``; positions that fall outside are
    reflected (``reflect=True``, like ``numpy.pad(mode="reflect")``: ``-1 → 1``) or set to
    ``fill``. A random crop of the reflect-padded image is this with ``|dy|, |dx| <= pad``.
    """
    n, c, h, w = x.shape
    rows, row_ok = _source_index(torch.arange(h, device=x.device), dy, h, reflect)
    cols, col_ok = _source_index(torch.arange(w, device=x.device), dx, w, reflect)
    out = x.gather(2, rows[:, None, :, None].expand(n, c, h, w))
    out = out.gather(3, cols[:, None, None, :].expand(n, c, h, w))
    if not reflect:
        ok = row_ok[:, None, :, None] & col_ok[:, None, None, :]
        out = torch.where(ok, out, torch.as_tensor(fill, dtype=x.dtype, device=x.device))
    return out


def affine_pixels(x: torch.Tensor, matrix: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """Inverse-map affine warp in pixel coordinates, nearest neighbour, zero fill.

    Output pixel centre ``u = (j + 0.5, i + 0.5)`` (x right, y down, origin at the
    top-left corner) samples the input at ``matrix_n @ u + offset_n`` — the
    convention of PIL's ``Image.transform(AFFINE)``. A sample point exactly halfway between two
    pixels (shear 0.12 on row 12: 0.12 · 12.5 = 1.5 px) is rounded half to even here, while PIL's
    choice follows the last bit of its double arithmetic. ``matrix``: ``(N, 2, 2)``,
    ``offset``: ``(N, 2)`` in px. Converted to ``F.affine_grid``'s normalised
    coordinates ``p = u / (W/2, H/2) − 1`` (``align_corners=False``):
    ``θ = [D⁻¹ M D | D⁻¹ (M c + t − c)]`` with ``D = diag(W/2, H/2)``, ``c = (W/2, H/2)``.
    """
    n, c, h, w = x.shape
    half = torch.tensor([w / 2.0, h / 2.0], dtype=x.dtype, device=x.device)
    m = matrix.to(x.dtype)
    lin = m * half[None, None, :] / half[None, :, None]
    trans = (m[:, :, 0] * half[0] + m[:, :, 1] * half[1] + offset.to(x.dtype) - half) / half
    theta = torch.cat([lin, trans[:, :, None]], dim=2)
    return F.grid_sample(x, affine_grid(theta, h, w), mode="nearest", padding_mode="zeros", align_corners=False)


def affine_grid(theta: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``F.affine_grid(theta, (N, ·, height, width), align_corners=False)`` written out elementwise.

    ``grid[n, i, j] = θ_n @ (x_j, y_i, 1)`` with pixel centres ``x_j = (2j + 1)/W − 1``. torch's version
    is a batched matrix product, whose rounding on a GPU may change with the batch size; this one
    gives every sample the same bits however the batch is made up.
    """
    xs = (2 * torch.arange(width, device=theta.device, dtype=theta.dtype) + 1) / width - 1
    ys = (2 * torch.arange(height, device=theta.device, dtype=theta.dtype) + 1) / height - 1
    t = theta[:, :, :, None, None]
    grid = t[:, :, 0] * xs[None, None, None, :] + t[:, :, 1] * ys[None, None, :, None] + t[:, :, 2]
    return grid.permute(0, 2, 3, 1)


def rotate(x: torch.Tensor, degrees: torch.Tensor) -> torch.Tensor:
    """Rotate counter-clockwise (as displayed) by ``degrees`` about the image centre, zero fill
    (PIL ``Image.rotate``): input point ``= R(θ)(u − c) + c``, ``R = [[cos, −sin], [sin, cos]]``."""
    rad = torch.deg2rad(degrees.to(x.dtype))
    cos, sin = torch.cos(rad), torch.sin(rad)
    matrix = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
    centre = torch.tensor([x.shape[3] / 2.0, x.shape[2] / 2.0], dtype=x.dtype, device=x.device)
    return affine_pixels(x, matrix, centre - matrix @ centre)


def shear(x: torch.Tensor, amount: torch.Tensor, axis: str) -> torch.Tensor:
    """Shear about the top-left corner, zero fill (PIL affine ``(1, v, 0, 0, 1, 0)`` for ``axis="x"``:
    output ``(x, y)`` samples input ``(x + v·y, y)``; ``axis="y"``: input ``(x, y + v·x)``)."""
    one, zero, v = torch.ones_like(amount, dtype=x.dtype), torch.zeros_like(amount, dtype=x.dtype), amount.to(x.dtype)
    rows = ([one, v], [zero, one]) if axis == "x" else ([one, zero], [v, one])
    matrix = torch.stack([torch.stack(rows[0], -1), torch.stack(rows[1], -1)], -2)
    return affine_pixels(x, matrix, torch.zeros(len(x), 2, dtype=x.dtype, device=x.device))


def translate(x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor) -> torch.Tensor:
    """Move the content by ``(dy, dx)`` px with zero fill: ``out[i, j] = x[i − dy, j − dx]``."""
    return shift_images(x, dy.long(), dx.long(), reflect=False, fill=0.0)


def cutout(x: torch.Tensor, cy: torch.Tensor, cx: torch.Tensor, size: int, fill) -> torch.Tensor:
    """Set a ``size × size`` square to ``fill`` (a scalar or one value per channel).

    The square covers rows ``[cy − size//2, cy − size//2 + size)`` and the same for
    columns, clipped at the image borders (so it may be smaller near an edge).
    """
    n, c, h, w = x.shape
    top, left = cy[:, None] - size // 2, cx[:, None] - size // 2
    rows, cols = torch.arange(h, device=x.device)[None, :], torch.arange(w, device=x.device)[None, :]
    in_rows = (rows >= top) & (rows < top + size)
    in_cols = (cols >= left) & (cols < left + size)
    mask = in_rows[:, None, :, None] & in_cols[:, None, None, :]
    fill = torch.as_tensor(fill, dtype=x.dtype, device=x.device).reshape(1, -1, 1, 1)
    return torch.where(mask, fill, x)


# Photometric ops on pixels in [0, 1] (PIL semantics). ``factor`` etc. are (N,) tensors.

def _per_sample(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return v.to(x.dtype).reshape(-1, 1, 1, 1)


def luminance(x: torch.Tensor) -> torch.Tensor:
    """Grey level ``(N, 1, H, W)``: ITU-R 601 ``0.299 R + 0.587 G + 0.114 B`` for 3 channels
    (PIL's ``convert("L")``), the mean over channels otherwise (the image itself when C = 1)."""
    # written out elementwise: a reduction kernel's summation order may depend on the batch shape
    if x.shape[1] == 3:
        return 0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]
    total = x[:, 0:1]
    for ch in range(1, x.shape[1]):
        total = total + x[:, ch:ch + 1]
    return total / x.shape[1]


def blend(degenerate: torch.Tensor, x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """PIL ``ImageEnhance``: ``clip(degenerate + factor · (x − degenerate), 0, 1)``."""
    return (degenerate + _per_sample(factor, x) * (x - degenerate)).clamp(0.0, 1.0)


def brightness(x, factor):
    """Blend with black: ``clip(factor · x)``."""
    return blend(torch.zeros_like(x), x, factor)


def color(x, factor):
    """Blend with the grey-level image (saturation)."""
    return blend(luminance(x), x, factor)


def contrast(x, factor):
    """Blend with a flat image at the sample's mean grey level, as PIL computes it: the mean of the
    8-bit grey levels rounded to a level, ``⌊Σ q / (H·W) + 1/2⌋ / 255``. Integer sums are exact, so the
    result cannot depend on the batch (a float mean's summation order may, on a GPU)."""
    n, _, h, w = x.shape
    total = to_levels(luminance(x)).reshape(n, h * w).sum(1)
    mean_level = (2 * total + h * w) // (2 * h * w)
    grey = (mean_level.to(x.dtype) / 255.0).reshape(n, 1, 1, 1)
    return blend(grey.expand_as(x), x, factor)


def sharpness(x, factor):
    """Blend with PIL's SMOOTH filter ``[[1,1,1],[1,5,1],[1,1,1]] / 13``, border pixels kept as they are."""
    smooth = x.clone()
    h, w = x.shape[2], x.shape[3]
    total = 4 * x[..., 1:-1, 1:-1]
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            total = total + x[..., dy:dy + h - 2, dx:dx + w - 2]
    smooth[..., 1:-1, 1:-1] = total / 13.0
    return blend(smooth, x, factor)


def to_levels(x: torch.Tensor) -> torch.Tensor:
    """8-bit levels ``round(255 · clip(x, 0, 1))`` as int64."""
    return torch.round(x.clamp(0.0, 1.0) * 255.0).long()


def autocontrast(x: torch.Tensor) -> torch.Tensor:
    """Stretch each channel of each image to ``[0, 1]``: ``(x − min) / (max − min)``; flat channels unchanged."""
    lo = x.amin((2, 3), keepdim=True)
    hi = x.amax((2, 3), keepdim=True)
    span = hi - lo
    return torch.where(span > 0, (x - lo) / torch.where(span > 0, span, torch.ones_like(span)), x)


def equalize(x: torch.Tensor) -> torch.Tensor:
    """PIL ``ImageOps.equalize`` per image and channel on 8-bit levels ``q``.

    ``step = (Σ hist − hist[max level present]) // 255``;
    ``lut[i] = (step // 2 + Σ_{j<i} hist[j]) // step`` clipped to 255; identity when ``step = 0``
    (e.g. a single level). Output ``lut[q] / 255``.
    """
    n, c, h, w = x.shape
    q = to_levels(x).reshape(n, c, h * w)
    hist = torch.zeros(n, c, 256, dtype=torch.long, device=x.device).scatter_add_(2, q, torch.ones_like(q))
    top = hist.gather(2, q.amax(2, keepdim=True))
    step = (h * w - top) // 255
    lut = (torch.cumsum(hist, 2) - hist + step // 2) // step.clamp(min=1)
    out = torch.where(step > 0, lut.clamp(max=255).gather(2, q), q)
    return (out.to(x.dtype) / 255.0).reshape(n, c, h, w)


def posterize(x: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """Keep the top ``bits`` bits of each 8-bit level: ``(q >> (8 − bits)) << (8 − bits)``, over 255."""
    drop = (8 - bits.long()).reshape(-1, 1, 1, 1)
    return ((to_levels(x) >> drop) << drop).to(x.dtype) / 255.0


def solarize(x: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """Invert (``1 − x``) every pixel whose 8-bit level is ``>= threshold`` (PIL ``ImageOps.solarize``)."""
    return torch.where(to_levels(x) >= threshold.reshape(-1, 1, 1, 1), 1.0 - x, x)


# --------------------------------------------------------------------------
# FixMatch's RandAugment pool (kekmodel/FixMatch-pytorch ``fixmatch_augment_pool``)

PARAMETER_MAX = 10
OP_NAMES = ("AutoContrast", "Brightness", "Color", "Contrast", "Equalize", "Identity", "Posterize",
            "Rotate", "Sharpness", "ShearX", "ShearY", "Solarize", "TranslateX", "TranslateY")
COLOR_OP_ID = OP_NAMES.index("Color")


def float_magnitude(level: torch.Tensor, max_v: float, bias: float) -> torch.Tensor:
    """``level · max_v / 10 + bias`` (FixMatch's ``_float_parameter``), float64."""
    return level.double() * max_v / PARAMETER_MAX + bias


def int_magnitude(level: torch.Tensor, max_v: float, bias: int) -> torch.Tensor:
    """``int(level · max_v / 10) + bias`` (FixMatch's ``_int_parameter``), int64."""
    return torch.floor(level.double() * max_v / PARAMETER_MAX).long() + bias


def _translate_px(x, level, sign, axis_size):
    return sign * torch.floor(float_magnitude(level, 0.3, 0.0) * axis_size).long()


# op id -> fn(x_pixels, level, sign); levels are integers in [1, m).
_OPS: dict[int, Callable] = {
    0: lambda x, v, s: autocontrast(x),
    1: lambda x, v, s: brightness(x, float_magnitude(v, 0.9, 0.05)),
    2: lambda x, v, s: color(x, float_magnitude(v, 0.9, 0.05)),
    3: lambda x, v, s: contrast(x, float_magnitude(v, 0.9, 0.05)),
    4: lambda x, v, s: equalize(x),
    5: lambda x, v, s: x,
    6: lambda x, v, s: posterize(x, int_magnitude(v, 4, 4)),
    7: lambda x, v, s: rotate(x, s * int_magnitude(v, 30, 0)),
    8: lambda x, v, s: sharpness(x, float_magnitude(v, 0.9, 0.05)),
    9: lambda x, v, s: shear(x, s * float_magnitude(v, 0.3, 0.0), "x"),
    10: lambda x, v, s: shear(x, s * float_magnitude(v, 0.3, 0.0), "y"),
    11: lambda x, v, s: solarize(x, 256 - int_magnitude(v, 256, 0)),
    12: lambda x, v, s: translate(x, torch.zeros_like(v), _translate_px(x, v, s, x.shape[3])),
    13: lambda x, v, s: translate(x, _translate_px(x, v, s, x.shape[2]), torch.zeros_like(v)),
}


def apply_op(op_id: int, x_pixels: torch.Tensor, level: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """Pool op ``op_id`` (index in :data:`OP_NAMES`) at per-sample ``level`` and ``sign`` on pixels in [0, 1]."""
    return _OPS[op_id](x_pixels, level, sign).clamp(0.0, 1.0)


# --------------------------------------------------------------------------
# Augmentations


def _stats(values, channels: int, what: str) -> torch.Tensor:
    t = torch.as_tensor(values, dtype=torch.float64).flatten()
    if len(t) != channels or not torch.isfinite(t).all():
        raise ValueError(f"{what}(={values!r}) must hold {channels} finite value(s), one per channel")
    return t


@dataclass(frozen=True)
class Identity:
    """``none``: returns its input."""

    def draw(self, n: int, generator: torch.Generator) -> IdentityParams:
        _check_n(n)
        return IdentityParams(torch.ones(n, dtype=torch.bool))

    def apply(self, x: torch.Tensor, params: IdentityParams) -> torch.Tensor:
        _prepare(x, params)
        return x


@dataclass(frozen=True)
class Flip:
    """Horizontal flip with probability ``p`` per sample (FedMix's π': ``p = 1``; weak view: ``p = 1/2``)."""
    p: float = 1.0

    def __post_init__(self):
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"flip probability p(={self.p!r}) must be in [0, 1]")

    def draw(self, n: int, generator: torch.Generator) -> FlipParams:
        _check_n(n)
        return FlipParams(torch.rand(n, generator=generator) < self.p)

    def apply(self, x: torch.Tensor, params: FlipParams) -> torch.Tensor:
        params = _prepare(x, params)
        return torch.where(params.flip[:, None, None, None], hflip(x), x)


@dataclass(frozen=True)
class Shift:
    """Integer shift uniform in ``[-max_px, max_px]`` per axis; borders ``"reflect"``ed or filled with
    ``"zeros"`` (0 of the normalised input, i.e. the channel mean). With ``reflect`` this is also
    the reflect-pad random crop of the weak view (``max_px`` = pad)."""
    max_px: int = 2
    fill: str = "reflect"

    def __post_init__(self):
        _check_int("shift max_px", self.max_px, 0)
        if self.fill not in ("reflect", "zeros"):
            raise ValueError(f"shift fill(={self.fill!r}) must be 'reflect' or 'zeros'")

    def draw(self, n: int, generator: torch.Generator) -> ShiftParams:
        _check_n(n)
        span = 2 * self.max_px + 1
        d = torch.randint(span, (2, n), generator=generator) - self.max_px
        return ShiftParams(dy=d[0], dx=d[1])

    def apply(self, x: torch.Tensor, params: ShiftParams) -> torch.Tensor:
        params = _prepare(x, params)
        if self.fill == "reflect" and self.max_px >= min(x.shape[2], x.shape[3]):
            raise ValueError(f"reflect shift of up to {self.max_px} px needs images larger than that; "
                             f"got {x.shape[2]}x{x.shape[3]}")
        return shift_images(x, params.dy, params.dx, reflect=self.fill == "reflect")


@dataclass(frozen=True)
class RandAugmentMC:
    """FixMatch's RandAugment: ``n_ops`` ops drawn uniformly with replacement from ``pool``
    (op ids into :data:`OP_NAMES`), each applied with probability ``p`` at an integer level uniform
    in ``[1, magnitude)``; geometric ops get a random sign. Works on pixels ``x · std + mean``
    clipped to [0, 1] after each op, and returns ``(pixels − mean) / std``."""
    mean: tuple[float, ...]
    std: tuple[float, ...]
    pool: tuple[int, ...] = tuple(range(len(OP_NAMES)))
    n_ops: int = 2
    magnitude: int = 10
    p: float = 0.5

    def __post_init__(self):
        _check_int("RandAugment n", self.n_ops, 1)
        _check_int("RandAugment m (levels are drawn from [1, m))", self.magnitude, 2, PARAMETER_MAX)
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"RandAugment op probability p(={self.p!r}) must be in [0, 1]")
        if not self.pool or any(op not in _OPS for op in self.pool):
            raise ValueError(f"RandAugment pool(={self.pool!r}) must be a non-empty tuple of op ids "
                             f"0..{len(OP_NAMES) - 1}")
        if len(self.mean) != len(self.std) or any(s <= 0 for s in self.std):
            raise ValueError(f"RandAugment mean(={self.mean!r}) and std(={self.std!r}) need one value "
                             "per channel, std > 0")

    def draw(self, n: int, generator: torch.Generator) -> RandAugmentParams:
        _check_n(n)
        shape = (n, self.n_ops)
        choice = torch.randint(len(self.pool), shape, generator=generator)
        level = torch.randint(1, self.magnitude, shape, generator=generator)
        applied = torch.rand(shape, generator=generator) < self.p
        sign = torch.where(torch.rand(shape, generator=generator) < 0.5, -1, 1)
        return RandAugmentParams(op_ids=torch.tensor(self.pool)[choice], applied=applied, level=level, sign=sign)

    def apply(self, x: torch.Tensor, params: RandAugmentParams) -> torch.Tensor:
        params = _prepare(x, params)
        if x.shape[1] != len(self.mean):
            raise ValueError(f"RandAugment was built for {len(self.mean)} channel(s); x has {x.shape[1]}")
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).reshape(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).reshape(1, -1, 1, 1)
        pixels = (x * std + mean).clamp(0.0, 1.0)
        for slot in range(self.n_ops):
            chosen = params.op_ids[:, slot].masked_fill(~params.applied[:, slot], -1)
            for op_id in sorted(set(self.pool) - {OP_NAMES.index("Identity")}):
                idx = torch.nonzero(chosen == op_id).flatten()
                if len(idx):
                    done = apply_op(op_id, pixels[idx], params.level[idx, slot], params.sign[idx, slot])
                    pixels = pixels.index_copy(0, idx, done)
        return (pixels - mean) / std


@dataclass(frozen=True)
class Cutout:
    """A ``size × size`` square (clipped at the borders) centred on a pixel drawn uniformly from the
    ``height × width`` image, set to ``fill`` (one value, or one per channel, in the input's units)."""
    height: int
    width: int
    size: int
    fill: tuple[float, ...]

    def __post_init__(self):
        _check_int("cutout size (px)", self.size, 0)

    def draw(self, n: int, generator: torch.Generator) -> CutoutParams:
        _check_n(n)
        return CutoutParams(cy=torch.randint(self.height, (n,), generator=generator),
                            cx=torch.randint(self.width, (n,), generator=generator))

    def apply(self, x: torch.Tensor, params: CutoutParams) -> torch.Tensor:
        params = _prepare(x, params)
        if len(self.fill) not in (1, x.shape[1]):
            raise ValueError(f"cutout fill(={self.fill!r}) needs 1 or {x.shape[1]} value(s)")
        return cutout(x, params.cy, params.cx, self.size, self.fill)


@dataclass(frozen=True)
class Sequential:
    """Stages applied in order; each draws its own params, in order, from the same generator."""
    stages: tuple

    def draw(self, n: int, generator: torch.Generator) -> SequentialParams:
        _check_n(n)
        return SequentialParams(tuple(stage.draw(n, generator) for stage in self.stages))

    def apply(self, x: torch.Tensor, params: SequentialParams) -> torch.Tensor:
        params = _prepare(x, params)
        for stage, stage_params in zip(self.stages, params.stages, strict=True):
            x = stage.apply(x, stage_params)
        return x


# --------------------------------------------------------------------------
# Registry

CUTOUT_FILL_PIXEL = 127 / 255  # FixMatch's grey (127, 127, 127), on the [0, 1] pixel scale


def default_pad_px(height: int, width: int) -> int:
    """Reflect-pad of the weak crop: ``int(0.125 · min(H, W))`` — 4 px at 32×32, 3 px at 28×28."""
    return int(0.125 * min(height, width))


def default_cutout_px(height: int, width: int) -> int:
    """Cutout side: ``min(H, W) // 2`` — 16 px at 32×32, 14 px at 28×28."""
    return min(height, width) // 2


def randaugment_pool(channels: int) -> tuple[int, ...]:
    """FixMatch's 14 ops; without Color unless the images have 3 (RGB) channels."""
    return tuple(i for i in range(len(OP_NAMES)) if channels == 3 or i != COLOR_OP_ID)


def weak(input_shape, pad_px: int | None = None, hflip: bool = True) -> Sequential:
    """Flip (p = 1/2), then a reflect-pad crop (a reflect shift of up to ``pad_px``).

    ``hflip=False`` (a data set whose labels a mirror changes: digits, MNIST) leaves the flip out and keeps
    the crop alone, as FixMatch (§2.3) does for SVHN."""
    _, h, w = input_shape
    pad = default_pad_px(h, w) if pad_px is None else pad_px
    return Sequential(((Flip(0.5),) if hflip else ()) + (Shift(pad, "reflect"),))


def strong(input_shape, mean, std, pad_px: int | None = None, n_ops: int = 2, magnitude: int = 10,
           cutout_px: int | None = None, cutout_fill_pixel: float = CUTOUT_FILL_PIXEL,
           hflip: bool = True) -> Sequential:
    """Weak (without its flip when ``hflip=False``), then RandAugmentMC(n, m) on pixels, then Cutout filled
    with grey ``cutout_fill_pixel``. RandAugment's pool holds no mirror, so nothing else flips."""
    c, h, w = input_shape
    mean_t, std_t = _stats(mean, c, "mean"), _stats(std, c, "std")
    if (std_t < 0).any():
        raise ValueError(f"std(={std!r}) must be >= 0 for every channel")
    std_t = torch.where(std_t > 0, std_t, torch.ones_like(std_t))  # the loader only centres a constant channel
    size = default_cutout_px(h, w) if cutout_px is None else cutout_px
    fill = tuple(float(v) for v in (cutout_fill_pixel - mean_t) / std_t)
    randaug = RandAugmentMC(mean=tuple(mean_t.tolist()), std=tuple(std_t.tolist()), pool=randaugment_pool(c),
                            n_ops=n_ops, magnitude=magnitude)
    return Sequential(weak(input_shape, pad_px, hflip).stages + (randaug, Cutout(h, w, size, fill)))


AUGMENTATIONS: dict[str, Callable] = {
    "none": lambda shape, mean, std, hflip: Identity(),
    "weak": lambda shape, mean, std, hflip: weak(shape, hflip=hflip),
    "strong": lambda shape, mean, std, hflip: strong(shape, mean, std, hflip=hflip),
    "shift": lambda shape, mean, std, hflip: Shift(2, "reflect"),
    # FedMix's π' on a data set a mirror relabels: its label-preserving substitute is π, the ±2 px shift
    "flip": lambda shape, mean, std, hflip: Flip(1.0) if hflip else Shift(2, "reflect"),
}
NEEDS_STATS = frozenset({"strong"})


def make_augmentation(name: str, input_shape: Sequence[int], mean: Sequence[float] | None = None,
                      std: Sequence[float] | None = None, hflip: bool = True) -> Augmentation:
    """Build a registered augmentation for images of ``input_shape = (C, H, W)``.

    ``mean`` / ``std`` are the per-channel normalisation of the inputs (on the [0, 1] pixel scale,
    ``Dataset.mean`` / ``Dataset.std``); ``strong`` needs them to work on pixels. ``hflip``: whether a
    left–right mirror keeps the data set's labels (``DatasetSpec.hflip_preserves_labels``); when it does not,
    ``weak`` and ``strong`` drop their flip and ``flip`` becomes ``shift`` (docs/model/augmentations.md).
    """
    if not isinstance(hflip, bool):
        raise ValueError(f"augmentation {name!r}: hflip(={hflip!r}) must be True or False")
    if name not in AUGMENTATIONS:
        raise ValueError(f"unknown augmentation {name!r}; expected one of: {', '.join(AUGMENTATIONS)}")
    shape = tuple(input_shape)
    if len(shape) != 3 or any(isinstance(s, bool) or not isinstance(s, int) for s in shape) or min(shape[1:]) < 8 \
            or shape[0] < 1:
        raise ValueError(f"augmentation {name!r}: input_shape(={input_shape!r}) must be (C, H, W) images "
                         "with C >= 1 and H, W >= 8")
    if name in NEEDS_STATS and (mean is None or std is None):
        raise ValueError(f"augmentation {name!r} works on [0, 1] pixels and needs the data set's per-channel "
                         f"mean and std; got mean={mean!r}, std={std!r}")
    return AUGMENTATIONS[name](shape, mean, std, hflip)
