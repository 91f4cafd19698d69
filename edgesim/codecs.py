"""The codecs of compressed transfers and their one registry: each a frozen dataclass of its options with its
exact encoded size in bits (torch-free; plugins register here too).

A codec is one class, registered under a name (``@register_codec("qsgd")``): a frozen dataclass whose
fields are its options (the keys of ``[compression] uplink = {method = "qsgd", bits = 8}`` beside
``method`` and ``error_feedback``; each declared with :func:`edgesim.config.key`: its meaning, unit and
allowed values, the one rule that both checks it — ``check_keys(self)`` in ``__post_init__`` — and writes
its line of the scenario reference), with

- ``lossy`` (class attribute): whether decoding loses what ``error_feedback`` can carry;
- ``size_bits(self, sizes)``: the exact bits of one transfer of tensors of ``sizes`` numbers (what the
  clock charges; known before anything is encoded, the same for every device);
- ``label(self)`` (optional): a short name for ``edgesim plan`` (default: the name).

Its encoder and decoder are registered under the same name on the learning side
(:func:`edgesim.learning.compression.register_encoding`). A transfer carries P numbers in T tensors
(``sizes`` lists each tensor's numbers); the built-in codecs and their sizes (docs/model/compression.md):

- ``none``: 32-bit floats, ``32·P``; ``fp16``/``bf16``: 16-bit floats, ``16·P``.
- ``qsgd`` (Alistarh et al., NeurIPS 2017, §3.1, Eq. (4)): per bucket of ``bucket`` numbers of a tensor
  its 32-bit norm, per number a sign bit and its level in ``bits`` bits: ``32·Σ_t ⌈n_t / bucket⌉ + (b + 1)·P``.
- ``topk`` (Stich et al., NeurIPS 2018, §2): k = ⌈f·P⌉ 32-bit values and their positions, k indices of
  ⌈log₂ P⌉ bits or a P-bit bitmap, whichever is smaller: ``32·k + min(k·⌈log₂ P⌉, P)``.
- ``sign`` (Bernstein et al., ICML 2018; Karimireddy et al., ICML 2019): per tensor a 32-bit scale
  ‖v‖₁/d, then one bit per number: ``32·T + P``.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Sequence

from .config import Finite, Integer, check_keys, fail, key
from .registries import claim

CODECS: dict[str, type] = {}  # name -> codec class (its options dataclass)
FLOAT_BITS = 32  # an uncompressed number, a norm, a scale, a top-k value
HALF_BITS = 16
MAX_QSGD_BITS = 16
DEFAULT_BUCKET = 512  # QSGD's bucket size in Alistarh et al.'s experiments (§5)


def register_codec(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_codec("my_codec")`` makes ``[compression] uplink = "my_codec"`` choose the
    class (a frozen dataclass of its options with ``lossy`` and ``size_bits(self, sizes)``; module docstring).
    A name already taken is refused in one line naming both classes (:func:`edgesim.registries.claim`)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"codec name {name!r}: expected a name such as 'my_codec' (letters, digits, _)")

    def add(cls: type) -> type:
        if not dataclasses.is_dataclass(cls) or not callable(getattr(cls, "size_bits", None)) or not isinstance(
                getattr(cls, "lossy", None), bool):
            raise ValueError(f"codec {name!r} ({cls.__name__}): expected a frozen dataclass of its options with "
                             f"lossy = True/False and a method size_bits(self, sizes)")
        return claim(CODECS, name, cls, "codec")

    return add


def methods() -> tuple[str, ...]:
    """The registered codecs' names, in registration order (the built-in ones first)."""
    return tuple(CODECS)


def lossy_methods() -> tuple[str, ...]:
    """The codecs whose error ``error_feedback`` can carry (each class's ``lossy``)."""
    return tuple(name for name, cls in CODECS.items() if cls.lossy)


def option_fields() -> dict[str, dataclasses.Field]:
    """Every option of every registered codec, by name (the first codec that declares a name gives its field)."""
    out: dict[str, dataclasses.Field] = {}
    for cls in CODECS.values():
        for f in dataclasses.fields(cls):
            out.setdefault(f.name, f)
    return out


def readers(option: str) -> tuple[str, ...]:
    """The codecs that have the option ``option``."""
    return tuple(name for name, cls in CODECS.items() if option in {f.name for f in dataclasses.fields(cls)})


# --------------------------------------------------------------------------- the bits, exactly


def topk_count(fraction: float, n_numbers: int) -> int:
    """k = ⌈f·P⌉ numbers sent by top-k (at least one of a non-empty vector, never more than P)."""
    if n_numbers == 0:
        return 0
    return min(n_numbers, max(1, math.ceil(fraction * n_numbers - 1e-9)))  # 1e-9: 0.07·100 is 7.000000000000001


def index_bits(n_numbers: int) -> int:
    """⌈log₂ P⌉: the bits of one position among P (0 for P ≤ 1)."""
    return (n_numbers - 1).bit_length() if n_numbers > 1 else 0


def qsgd_buckets(sizes: Sequence[int], bucket: int) -> int:
    """Σ_t ⌈n_t / bucket⌉: QSGD's norms (a bucket never spans two tensors)."""
    return sum(-(-int(n) // int(bucket)) for n in sizes)


# --------------------------------------------------------------------------- the built-in codecs


@register_codec("none")
@dataclass(frozen=True)
class NoCodec:
    """32-bit floats, as without compression: 32·P bits."""

    lossy: ClassVar[bool] = False

    def size_bits(self, sizes: Sequence[int]) -> int:
        return FLOAT_BITS * sum(sizes)


@register_codec("fp16")
@dataclass(frozen=True)
class Fp16:
    """IEEE half-precision casts: 16·P bits."""

    lossy: ClassVar[bool] = False  # a cast loses ~1e-3, which error feedback is not for

    def size_bits(self, sizes: Sequence[int]) -> int:
        return HALF_BITS * sum(sizes)


@register_codec("bf16")
@dataclass(frozen=True)
class Bf16:
    """bfloat16 casts: 16·P bits."""

    lossy: ClassVar[bool] = False

    def size_bits(self, sizes: Sequence[int]) -> int:
        return HALF_BITS * sum(sizes)


@register_codec("qsgd")
@dataclass(frozen=True)
class Qsgd:
    """QSGD (Alistarh et al. 2017, Eq. (4)): 32·Σ_t ⌈n_t / bucket⌉ + (b + 1)·P bits.

    Per bucket of ``bucket`` numbers of one tensor its 32-bit norm; per number a sign and a b-bit level."""

    bits: int | None = key(None, "QSGD's bits per number (levels 2^bits − 1)", unit="bit", allowed=Integer(
        1, MAX_QSGD_BITS, expected=f"an integer in 1..{MAX_QSGD_BITS} (QSGD's levels s = 2^bits - 1)"))
    bucket: int = key(DEFAULT_BUCKET, "QSGD's numbers per norm", unit="numbers",
                      allowed=Integer(1, expected="an integer >= 1 (numbers per QSGD norm)"))
    lossy: ClassVar[bool] = True

    def __post_init__(self):
        if self.bits is None:  # no default: the method needs it said
            fail("bits", None, 'an integer in 1..16 with method = "qsgd", e.g. {method = "qsgd", bits = 8}')
        check_keys(self)

    def size_bits(self, sizes: Sequence[int]) -> int:
        return FLOAT_BITS * qsgd_buckets(sizes, self.bucket) + (self.bits + 1) * sum(sizes)

    def label(self) -> str:
        return f"qsgd{self.bits}"


@register_codec("topk")
@dataclass(frozen=True)
class TopK:
    """top-k (Stich et al. 2018): 32·k + min(k·⌈log₂ P⌉, P) bits, k = ⌈f·P⌉.

    The k largest magnitudes of the whole vector as 32-bit values, and their positions (indices or a bitmap)."""

    fraction: float | None = key(None, "top-k's share of numbers kept", allowed=Finite(
        minimum=0, strict=True, maximum=1, expected="a number in (0, 1] (the share of the numbers sent)"))
    lossy: ClassVar[bool] = True

    def __post_init__(self):
        if self.fraction is None:  # no default: the method needs it said
            fail("fraction", None, 'a number in (0, 1] with method = "topk", e.g. {method = "topk", fraction = 0.01}')
        check_keys(self)

    def size_bits(self, sizes: Sequence[int]) -> int:
        p = sum(sizes)
        k = topk_count(self.fraction, p)
        return FLOAT_BITS * k + min(k * index_bits(p), p)

    def label(self) -> str:
        return f"top{self.fraction * 100:g}%"


@register_codec("sign")
@dataclass(frozen=True)
class Sign:
    """Scaled sign (Bernstein et al. 2018; Karimireddy et al. 2019): 32·T + P bits.

    Per tensor its 32-bit scale ‖v‖₁/d; one bit per number."""

    lossy: ClassVar[bool] = True

    def size_bits(self, sizes: Sequence[int]) -> int:
        return FLOAT_BITS * sum(1 for s in sizes if s > 0) + sum(sizes)
