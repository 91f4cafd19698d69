"""Image augmentations in plain torch, batched on the compute device, random only through a generator.

Every augmentation has two methods:

- ``draw(n, generator) -> params``: all the randomness of ``n`` samples, drawn on
  the CPU from a CPU ``torch.Generator`` (a dict of CPU tensors with leading
  dimension ``n``); how far it advances the generator depends on ``n`` only;
- ``apply(x, params) -> x'``: deterministic and batched over the ``n`` samples of
  ``x`` ``(n, C, H, W)`` on ``x``'s device — no Python loop over samples.

Because each sample's parameters are its own rows, ``apply(cat(xs),
concat_params([draw(len(x), g_x) …]))`` equals ``cat([apply(x, draw(len(x), g_x))
…])``: the trainer draws per client (from the client's own generator) and
augments all clients' rows in one call.

The augmentations (docs/augmentations.md):

- ``flip`` — horizontal flip with probability ½;
- ``crop`` — reflect-pad by ``pad`` pixels and crop back at a random offset
  (``pad`` = ⌊H/8⌋: 4 for 32×32, 3 for 28×28);
- ``weak`` — flip then crop: FixMatch's weak view and FedDure's (Sohn et al.,
  NeurIPS 2020, §2.3);
- ``strong`` — weak, then FixMatch's RandAugmentMC (two operations drawn with
  replacement from its pool of 14, each applied with probability ½ at a
  magnitude drawn uniformly from 1…m−1, m = 10), then Cutout of a square of
  ⌊H/2⌋ pixels (16 for 32×32, 14 for 28×28) filled with mid-grey. Colour
  (saturation) is dropped from the pool for one-channel images;
- ``shift`` — FedMix's shift perturbation: a random translation of up to 2
  pixels in each direction, reflect-filled;
- ``none`` — the identity.

Value range. Our images are normalised floats (per-channel mean/std). The
photometric operations of RandAugment are defined on [0, 1] pixels, so
``strong`` maps each image to [0, 1] by its own minimum and maximum, applies
the operations there, and maps the result back with the same two numbers.
Geometric operations fill uncovered pixels with 0 in that range (black, PIL's
default), Cutout with 0.5 (FixMatch's grey 127).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F

Params = dict[str, torch.Tensor]

# FixMatch's pool (kekmodel/FixMatch-pytorch, fixmatch_augment_pool): name → (max value, bias).
POOL = (
    ("autocontrast", 0.0, 0.0),
    ("brightness", 0.9, 0.05),
    ("color", 0.9, 0.05),
    ("contrast", 0.9, 0.05),
    ("equalize", 0.0, 0.0),
    ("identity", 0.0, 0.0),
    ("posterize", 4.0, 4.0),
    ("rotate", 30.0, 0.0),
    ("sharpness", 0.9, 0.05),
    ("shear_x", 0.3, 0.0),
    ("shear_y", 0.3, 0.0),
    ("solarize", 256.0, 0.0),
    ("translate_x", 0.3, 0.0),
    ("translate_y", 0.3, 0.0),
)
OP_NAMES = tuple(p[0] for p in POOL)


def concat_params(params_list: Sequence[Mapping[str, torch.Tensor]]) -> Params:
    """The parameters of several draws as one draw (concatenated along the sample dimension)."""
    if not params_list:
        return {}
    return {k: torch.cat([p[k] for p in params_list]) for k in params_list[0]}


def _check(x: torch.Tensor, params: Mapping[str, torch.Tensor]) -> int:
    if x.dim() != 4:
        raise ValueError(f"x(shape={tuple(x.shape)}) must be (n, C, H, W)")
    for k, v in params.items():
        if v.shape[0] != x.shape[0]:
            raise ValueError(f"params[{k!r}] has {v.shape[0]} rows for {x.shape[0]} samples")
    return x.shape[0]


def _to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """CPU parameters onto ``device``; to a GPU through pinned memory without blocking (no host sync)."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _rows(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return _to(mask, x.device).view(-1, *([1] * (x.dim() - 1)))


# --------------------------------------------------------------------------- simple ones


@dataclass(frozen=True)
class Identity:
    """No change."""

    def draw(self, n: int, generator: torch.Generator) -> Params:
        return {}

    def apply(self, x: torch.Tensor, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return x


@dataclass(frozen=True)
class Flip:
    """Horizontal flip of each sample with probability ``p``."""

    p: float = 0.5

    def draw(self, n: int, generator: torch.Generator) -> Params:
        return {"flip": torch.rand(n, generator=generator) < self.p}

    def apply(self, x: torch.Tensor, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        _check(x, params)
        return torch.where(_rows(params["flip"], x), x.flip(-1), x)


def _shift(x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, pad: int) -> torch.Tensor:
    """Each sample moved by (dy, dx) ∈ [−pad, pad]² pixels, reflect-filled: a crop of the reflect-padded image."""
    n, c, h, w = x.shape
    if n == 0 or pad == 0:
        return x
    xp = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    dev = x.device
    rows = torch.arange(h, device=dev).view(1, h) + _to(pad - dy, dev).view(n, 1)
    cols = torch.arange(w, device=dev).view(1, w) + _to(pad - dx, dev).view(n, 1)
    i = torch.arange(n, device=dev).view(n, 1, 1, 1)
    ch = torch.arange(c, device=dev).view(1, c, 1, 1)
    return xp[i, ch, rows.view(n, 1, h, 1), cols.view(n, 1, 1, w)]


@dataclass(frozen=True)
class Crop:
    """Reflect-pad by ``pad`` pixels and crop the original size at an offset uniform in [−pad, pad]² ."""

    pad: int = 4

    def draw(self, n: int, generator: torch.Generator) -> Params:
        d = torch.randint(-self.pad, self.pad + 1, (n, 2), generator=generator)
        return {"dy": d[:, 0], "dx": d[:, 1]}

    def apply(self, x: torch.Tensor, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        _check(x, params)
        if self.pad >= min(x.shape[-2:]):
            raise ValueError(f"pad(={self.pad}) must be smaller than the image ({tuple(x.shape[-2:])})")
        return _shift(x, params["dy"], params["dx"], self.pad)


@dataclass(frozen=True)
class Chain:
    """Several augmentations one after the other (their parameters prefixed by their position)."""

    parts: tuple

    def draw(self, n: int, generator: torch.Generator) -> Params:
        out = {}
        for i, a in enumerate(self.parts):
            out.update({f"{i}.{k}": v for k, v in a.draw(n, generator).items()})
        return out

    def apply(self, x: torch.Tensor, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        _check(x, params)
        for i, a in enumerate(self.parts):
            x = a.apply(x, {k.split(".", 1)[1]: v for k, v in params.items() if k.startswith(f"{i}.")})
        return x


# --------------------------------------------------------------------------- RandAugment's operations on [0, 1] images


def _gray(x: torch.Tensor) -> torch.Tensor:
    """ITU-R 601 luma (PIL's "L"), kept with one channel."""
    if x.shape[1] == 3:
        return (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3])
    return x.mean(1, keepdim=True)


def _blend(degenerate: torch.Tensor, x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """PIL's ImageEnhance: ``degenerate + factor·(x − degenerate)``, clipped to [0, 1]."""
    f = factor.view(-1, 1, 1, 1)
    return (degenerate + f * (x - degenerate)).clamp(0.0, 1.0)


def _affine(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Output pixel p samples input at ``theta·[p, 1]`` (normalised coordinates), nearest, 0 outside."""
    grid = F.affine_grid(theta.to(x.dtype), list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)


def _equalize(x: torch.Tensor) -> torch.Tensor:
    """Histogram equalisation of each channel over 256 levels (CDF mapping; flat channels unchanged)."""
    n, c, h, w = x.shape
    q = (x * 255).round().clamp(0, 255).long().view(n * c, h * w)
    hist = torch.zeros(n * c, 256, device=x.device, dtype=x.dtype).scatter_add_(1, q, torch.ones_like(x).view(n * c, -1))
    cdf = hist.cumsum(1)
    cdf_min = torch.where(hist > 0, cdf, torch.full_like(cdf, float(h * w))).min(1, keepdim=True).values
    denom = h * w - cdf_min  # 0 when the channel has a single level
    lut = ((cdf - cdf_min) / denom.clamp(min=1.0)).clamp(0, 1)
    out = lut.gather(1, q).view(n, c, h, w)
    return torch.where((denom <= 0).view(n, c, 1, 1), x, out)


def _op(name: str, x: torch.Tensor, level_cpu: torch.Tensor, sign_cpu: torch.Tensor) -> torch.Tensor:
    """One RandAugment operation on the [0, 1] images ``x`` at per-sample ``level`` (FixMatch's value) and sign.

    ``level_cpu``/``sign_cpu`` are CPU tensors (geometric operations build their
    matrices there); photometric ones move the levels to ``x``'s device.
    """
    if name == "identity":
        return x
    level = _to(level_cpu, x.device).to(x.dtype)
    if name == "autocontrast":
        lo = x.amin(dim=(2, 3), keepdim=True)
        hi = x.amax(dim=(2, 3), keepdim=True)
        return torch.where(hi > lo, (x - lo) / (hi - lo).clamp(min=1e-12), x)
    if name == "brightness":
        return _blend(torch.zeros_like(x), x, level)
    if name == "color":
        return _blend(_gray(x).expand_as(x), x, level)
    if name == "contrast":
        return _blend(_gray(x).mean(dim=(1, 2, 3), keepdim=True).expand_as(x), x, level)
    if name == "sharpness":
        k = torch.tensor([[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]], device=x.device, dtype=x.dtype) / 13
        c = x.shape[1]
        smooth = F.conv2d(x, k.view(1, 1, 3, 3).repeat(c, 1, 1, 1), padding=1, groups=c)
        border = torch.ones_like(x, dtype=torch.bool)
        border[..., 1:-1, 1:-1] = False
        return _blend(torch.where(border, x, smooth), x, level)
    if name == "equalize":
        return _equalize(x)
    if name == "posterize":
        bits = level.long().clamp(1, 8).view(-1, 1, 1, 1)
        q = (x * 255).floor().clamp(0, 255).long()
        step = (2 ** (8 - bits)).to(x.device)
        return (q - q % step).to(x.dtype) / 255
    if name == "solarize":
        t = (256 - level).view(-1, 1, 1, 1) / 256
        return torch.where(x >= t, 1.0 - x, x)
    n = x.shape[0]
    theta = torch.zeros(n, 2, 3, dtype=torch.float64)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    v = level_cpu.double() * sign_cpu.double()
    if name == "rotate":  # by v degrees about the centre
        a = v * math.pi / 180
        theta[:, 0, 0], theta[:, 0, 1] = torch.cos(a), -torch.sin(a)
        theta[:, 1, 0], theta[:, 1, 1] = torch.sin(a), torch.cos(a)
    elif name == "shear_x":
        theta[:, 0, 1] = v
    elif name == "shear_y":
        theta[:, 1, 0] = v
    elif name == "translate_x":  # v is a fraction of the width; normalised coordinates span 2
        theta[:, 0, 2] = 2 * v
    elif name == "translate_y":
        theta[:, 1, 2] = 2 * v
    else:
        raise ValueError(f"unknown operation {name!r}")
    return _affine(x, _to(theta, x.device))


def op_level(name: str, magnitude: torch.Tensor) -> torch.Tensor:
    """FixMatch's value of an operation at integer ``magnitude`` v ∈ [1, m): ``v·max/10 + bias`` (ints for
    posterize and solarize: ``⌊v·max/10⌋ + bias``)."""
    max_v, bias = {p[0]: (p[1], p[2]) for p in POOL}[name]
    v = magnitude.double()
    if name in ("posterize", "solarize"):
        return torch.floor(v * max_v / 10) + bias
    return v * max_v / 10 + bias


@dataclass(frozen=True)
class RandAugment:
    """FixMatch's RandAugmentMC: ``n_ops`` operations with replacement, each with probability ½, then Cutout.

    ``ops``: the pool's names (FixMatch's 14; without ``color`` for grayscale).
    ``cutout``: side of the grey square (0: none).
    """

    ops: tuple = OP_NAMES
    n_ops: int = 2
    magnitude: int = 10
    cutout: int = 16

    def __post_init__(self):
        unknown = set(self.ops) - set(OP_NAMES)
        if unknown or not self.ops:
            raise ValueError(f"ops(={self.ops}) must be a non-empty subset of {OP_NAMES}")
        if self.n_ops < 1 or self.magnitude < 2 or self.cutout < 0:
            raise ValueError(f"n_ops(={self.n_ops}) >= 1, magnitude(={self.magnitude}) >= 2, cutout(={self.cutout}) >= 0")

    def draw(self, n: int, generator: torch.Generator) -> Params:
        k = self.n_ops
        return {
            "op": torch.randint(0, len(self.ops), (n, k), generator=generator),
            "magnitude": torch.randint(1, self.magnitude, (n, k), generator=generator),
            "apply": torch.rand(n, k, generator=generator) < 0.5,
            "sign": torch.where(torch.rand(n, k, generator=generator) < 0.5, -1.0, 1.0),
            "centre": torch.rand(n, 2, generator=generator),
        }

    def apply(self, x: torch.Tensor, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        n = _check(x, params)
        if n == 0:
            return x
        lo = x.amin(dim=(1, 2, 3), keepdim=True)
        span = (x.amax(dim=(1, 2, 3), keepdim=True) - lo).clamp(min=1e-12)
        y = (x - lo) / span
        for slot in range(self.n_ops):
            op, mag = params["op"][:, slot], params["magnitude"][:, slot]
            on, sign = params["apply"][:, slot], params["sign"][:, slot]
            for j, name in enumerate(self.ops):
                idx = torch.nonzero((op == j) & on).flatten()  # CPU parameters: no device sync
                if idx.numel() == 0:
                    continue
                idx_d = _to(idx, x.device)
                y = y.index_copy(0, idx_d, _op(name, y.index_select(0, idx_d), op_level(name, mag[idx]), sign[idx]))
        if self.cutout:
            y = cutout(y, params["centre"], self.cutout, 0.5)
        return y * span + lo


def cutout(x: torch.Tensor, centre: torch.Tensor, size: int, fill: float) -> torch.Tensor:
    """A ``size``×``size`` square around each sample's centre (fractions of H, W) set to ``fill``, clipped at borders.

    As FixMatch's CutoutAbs: centre ``(⌊u·H⌋, ⌊v·W⌋)``, corners ``centre − size/2`` and ``+ size/2`` (integer halves).
    """
    n, _, h, w = x.shape
    dev = x.device
    cy = _to((centre[:, 0] * h).floor().long(), dev)
    cx = _to((centre[:, 1] * w).floor().long(), dev)
    y0, x0 = (cy - size // 2).clamp(min=0), (cx - size // 2).clamp(min=0)
    y1, x1 = (cy - size // 2 + size).clamp(max=h), (cx - size // 2 + size).clamp(max=w)
    r = torch.arange(h, device=dev).view(1, h)
    c = torch.arange(w, device=dev).view(1, w)
    inside_r = (r >= y0.view(n, 1)) & (r < y1.view(n, 1))
    inside_c = (c >= x0.view(n, 1)) & (c < x1.view(n, 1))
    box = (inside_r.view(n, 1, h, 1) & inside_c.view(n, 1, 1, w))
    return torch.where(box, torch.full_like(x, fill), x)


# --------------------------------------------------------------------------- the registry

AUGMENTATIONS = ("none", "flip", "crop", "weak", "strong", "shift")


def make_augmentation(name: str, input_shape: tuple):
    """Augmentation ``name`` (one of :data:`AUGMENTATIONS`) sized for samples of ``input_shape`` ``(C, H, W)``."""
    if len(input_shape) != 3:
        raise ValueError(f"input_shape(={input_shape}) must be (C, H, W): augmentations are for images")
    c, h, w = (int(s) for s in input_shape)
    pad = max(1, min(h, w) // 8)
    if name == "none":
        return Identity()
    if name == "flip":
        return Flip()
    if name == "crop":
        return Crop(pad)
    if name == "weak":
        return Chain((Flip(), Crop(pad)))
    if name == "strong":
        ops = OP_NAMES if c == 3 else tuple(o for o in OP_NAMES if o != "color")
        return Chain((Flip(), Crop(pad), RandAugment(ops, 2, 10, min(h, w) // 2)))
    if name == "shift":
        return Crop(min(2, min(h, w) - 1))
    raise ValueError(f"augmentation(={name!r}) must be one of {', '.join(map(repr, AUGMENTATIONS))}")
