"""How local training lays out and rounds its numbers: memory format and precision (``[train]``).

Both executors (:mod:`edgesim.learning.executors`) take one :class:`Numerics` and apply it in the
same places, so the sequential and the vectorised path train in the same format:

- **Memory format.** ``"channels_last"`` (the default) keeps every 4-D floating-point tensor of the
  model (the convolution weights) in NHWC memory order while a client trains, and hands its 4-D
  inputs to the model in the same order, so oneDNN (CPU) and cuDNN (GPU) run their channels-last
  kernels without converting on every call. The logical values are the same tensors; only the order
  of the arithmetic inside a convolution changes, so results may differ from ``"contiguous"`` in the
  last bits, and a run is deterministic in either. The executor hands the states back in the
  contiguous format, so nothing outside training sees the difference. ``"contiguous"`` is the NCHW
  format of earlier runs. The *vectorised* executor trains in the contiguous format whatever this
  says: torch's ``vmap`` cannot re-format its batched inputs, and weights stacked so that each
  client's slice is channels-last ran 1.3x slower on a CPU (vmap turns the clients' convolutions into
  one grouped convolution) and moved a degenerate BatchNorm case (one value per channel, float64)
  by 5e-3 (docs/extend/executors.md, "Memory format and precision").
- **Precision.** ``"float32"`` (the default) or ``"bfloat16"``: the forward pass and the loss run
  under ``torch.autocast`` with bfloat16 (matrix products and convolutions in bfloat16, reductions
  and losses in float32 as autocast's lists say); the master weights, their gradients, the
  optimizer's state and update and the aggregation stay float32. bfloat16 has float32's exponent
  range, so no loss scaling is needed (Kalamkar et al., "A Study of BFLOAT16 for Deep Learning
  Training", arXiv:1905.12322, 2019). Refused on hardware without bfloat16 arithmetic:
  :func:`bfloat16_unsupported`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import ContextManager, Mapping, Optional

import torch

from edgesim.learning.config import MEMORY_FORMATS, PRECISIONS


@dataclass(frozen=True)
class Numerics:
    """``precision`` (one of :data:`PRECISIONS`) and ``memory_format`` (one of :data:`MEMORY_FORMATS`) of training."""

    precision: str = "float32"
    memory_format: str = "channels_last"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision(={self.precision!r}) must be one of {', '.join(map(repr, PRECISIONS))}")
        if self.memory_format not in MEMORY_FORMATS:
            raise ValueError(f"memory_format(={self.memory_format!r}) must be one of "
                             f"{', '.join(map(repr, MEMORY_FORMATS))}")

    @property
    def channels_last(self) -> bool:
        return self.memory_format == "channels_last"

    def autocast(self, device: torch.device | str) -> ContextManager:
        """The forward pass's and the loss's context: bfloat16 autocast on ``device``'s type, or nothing."""
        if self.precision == "float32":
            return contextlib.nullcontext()
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)

    def params_in(self, params: Mapping[str, torch.Tensor]) -> dict:
        """``params`` in the training memory format: 4-D floating tensors channels-last, the others as they are
        (a no-op for a tensor already in it)."""
        if not self.channels_last:
            return dict(params)
        return {k: (_to_channels_last(v) if v.dim() == 4 and v.is_floating_point() else v) for k, v in params.items()}

    def input(self, x: torch.Tensor) -> torch.Tensor:
        """A 4-D floating input batch in the training memory format (others as they are)."""
        if self.channels_last and x.dim() == 4 and x.is_floating_point():
            return _to_channels_last(x)
        return x


DEFAULT_NUMERICS = Numerics()  # float32, channels-last: the executors' default


def _to_channels_last(t: torch.Tensor) -> torch.Tensor:
    """``t`` with channels-last strides, also where they are ambiguous (one channel, 1x1 maps: ``contiguous``
    would keep NCHW strides there, and the convolution then picks the NCHW kernel); ``t`` itself if it has them."""
    return t.to(memory_format=torch.channels_last)


def as_contiguous(params: Mapping[str, torch.Tensor]) -> dict:
    """``params`` in the default (row-major) memory format: what an executor hands back."""
    return {k: v.contiguous() for k, v in params.items()}


def _cpuinfo() -> dict:
    """The first CPU's ``/proc/cpuinfo`` fields (empty off Linux)."""
    out: dict = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, sep, value = line.partition(":")
            if not sep:
                if out:
                    break
                continue
            out.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return out


def bfloat16_unsupported(device: torch.device | str) -> Optional[str]:
    """Why ``device`` cannot train in bfloat16 (``None`` if it can).

    CPU: AVX512-BF16 or AMX-BF16 instructions (torch's own CPU feature checks, else ``/proc/cpuinfo``'s
    ``avx512_bf16``/``amx_bf16`` flags); without them oneDNN emulates bfloat16, slower than float32.
    CUDA: ``torch.cuda.is_bf16_supported()`` (Ampere and later).
    """
    device = torch.device(device)
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return None
        name = torch.cuda.get_device_name(device)
        return f"the GPU {name} has no bfloat16 arithmetic (needs compute capability 8.0+)"
    if device.type != "cpu":
        return f"bfloat16 training is supported on the CPU and on CUDA GPUs, not on {device.type!r}"
    if hardware_bfloat16(device) is not None:
        return None
    cpu = _cpuinfo().get("model name", "unknown model")
    return f"the CPU ({cpu}) has neither AVX512-BF16 nor AMX-BF16 instructions"


def hardware_bfloat16(device: torch.device | str) -> Optional[str]:
    """What gives ``device`` its bfloat16 arithmetic: ``"amx_bf16"``/``"avx512_bf16"`` (CPU), ``"cuda"``, or
    ``None``."""
    device = torch.device(device)
    if device.type == "cuda":
        return "cuda" if torch.cuda.is_bf16_supported() else None
    amx, avx = (getattr(torch.cpu, n, None) for n in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"))
    if callable(amx) and callable(avx):
        return "amx_bf16" if amx() else "avx512_bf16" if avx() else None
    flags = set(_cpuinfo().get("flags", "").split())
    return "amx_bf16" if "amx_bf16" in flags else "avx512_bf16" if "avx512_bf16" in flags else None


def describe(numerics: Numerics, device: torch.device | str) -> dict:
    """What ``run.json`` records of training's numbers: precision, memory format, device, the CPU kernels torch
    picked and the hardware's bfloat16 instructions (``None``: none)."""
    device = torch.device(device)
    return {"precision": numerics.precision, "memory_format": numerics.memory_format, "device": device.type,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "bfloat16_hardware": hardware_bfloat16(device)}
