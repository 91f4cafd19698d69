"""Compressed transfers: the ``[compression]`` options and the exact encoded size of each method, in bits.

A transfer carries a vector of P floating-point numbers split into T tensors
(the state-dict keys an algorithm sends; ``sizes`` lists each tensor's
numbers). Each method's encoding (docs/compression.md) and its size:

- ``none`` — 32-bit floats: ``32·P``.
- ``fp16``/``bf16`` — 16-bit floats (IEEE half / bfloat16): ``16·P``.
- ``qsgd`` with ``bits`` = b (Alistarh et al., NeurIPS 2017, §3.1, Eq. (4):
  stochastic quantisation to s = 2^b − 1 levels of ``|v_i| / ‖v‖₂``) in
  buckets of ``bucket`` consecutive numbers of a tensor (default 512, their
  §5), each bucket its own 32-bit norm, then per number one sign bit and its
  level in b bits (fixed width, no Elias coding):
  ``32·Σ_t ⌈n_t / bucket⌉ + (b + 1)·P``.
- ``topk`` with ``fraction`` = f (Stich et al., NeurIPS 2018, the top-k
  operator of §2): the k = ⌈f·P⌉ numbers largest in magnitude over the whole
  vector, as 32-bit values plus their positions — k indices of ⌈log₂ P⌉ bits
  each, or a P-bit bitmap when that is smaller: ``32·k + min(k·⌈log₂ P⌉, P)``.
- ``sign`` (Bernstein et al., ICML 2018, signSGD; scaled by the mean
  magnitude as in Karimireddy et al., ICML 2019, EF-SignSGD), one scale per
  tensor: its 32-bit ``‖v‖₁ / d``, then one bit per number: ``32·T + P``.

``error_feedback`` (any lossy uplink method; Stich et al. 2018, Alg. 1, "memory"):
the device adds what it did not send last time to its next update. This
module is torch-free: ``edgesim plan`` shows the sizes without a model; the
encoders and decoders are in ``edgesim.learning.compression``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .config import ConfigError, check_choice, fail

METHODS = ("none", "fp16", "bf16", "qsgd", "topk", "sign")
LOSSY = ("qsgd", "topk", "sign")  # methods whose error error_feedback can carry (casts lose too, but ~1e-3)
DIRECTIONS = ("uplink", "downlink")
CODEC_KEYS = ("method", "bits", "bucket", "fraction", "error_feedback")
DEFAULT_BUCKET = 512  # QSGD's bucket size in Alistarh et al.'s experiments (§5)
FLOAT_BITS = 32  # an uncompressed number, a norm, a scale, a top-k value
HALF_BITS = 16
MAX_QSGD_BITS = 16
SENDS_NOTHING = "nothing"  # an algorithm config's COMPRESSION when its devices send nothing (Local)


@dataclass(frozen=True)
class Codec:
    """One direction's compression: ``method`` (one of :data:`METHODS`), QSGD's ``bits`` (1–16, levels
    s = 2^bits − 1) and ``bucket`` (numbers per norm, default 512), top-k's ``fraction`` (0 < f ≤ 1) and
    ``error_feedback`` (carry the residual)."""

    method: str = "none"
    bits: int | None = None
    bucket: int | None = None
    fraction: float | None = None
    error_feedback: bool = False

    def __post_init__(self):
        check_choice("method", self.method, METHODS)
        if self.method == "qsgd":
            if self.bits is None:
                fail("bits", None, 'an integer in 1..16 with method = "qsgd", e.g. {method = "qsgd", bits = 8}')
            if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= MAX_QSGD_BITS:
                fail("bits", self.bits, f"an integer in 1..{MAX_QSGD_BITS} (QSGD's levels s = 2^bits - 1)")
            if self.bucket is None:
                object.__setattr__(self, "bucket", DEFAULT_BUCKET)
            if isinstance(self.bucket, bool) or not isinstance(self.bucket, int) or self.bucket < 1:
                fail("bucket", self.bucket, "an integer >= 1 (numbers per QSGD norm)")
        else:
            for key in ("bits", "bucket"):
                if getattr(self, key) is not None:
                    fail(key, getattr(self, key), f'left out: only method = "qsgd" reads it (method = {self.method!r})')
        if self.method == "topk":
            f = self.fraction
            if f is None:
                fail("fraction", None,
                 'a number in (0, 1] with method = "topk", e.g. {method = "topk", fraction = 0.01}')
            if isinstance(f, bool) or not isinstance(f, (int, float)) or not (math.isfinite(f) and 0 < f <= 1):
                fail("fraction", f, "a number in (0, 1] (the share of the numbers sent)")
        elif self.fraction is not None:
            fail("fraction", self.fraction, f'left out: only method = "topk" reads it (method = {self.method!r})')
        if not isinstance(self.error_feedback, bool):
            fail("error_feedback", self.error_feedback, "true or false")
        if self.error_feedback and self.method not in LOSSY:
            fail("error_feedback", True, f"false with method = {self.method!r} (only {', '.join(LOSSY)} "
                 "leave a residual to feed back)")

    @property
    def is_none(self) -> bool:
        return self.method == "none"

    def label(self) -> str:
        """A short name: ``"qsgd8"``, ``"top1%+ef"``, ``"fp16"``."""
        if self.method == "qsgd":
            return f"qsgd{self.bits}"
        if self.method == "topk":
            return f"top{self.fraction * 100:g}%" + ("+ef" if self.error_feedback else "")
        return self.method + ("+ef" if self.error_feedback else "")

    def to_dict(self) -> dict:
        return {k: v for k, v in (("method", self.method), ("bits", self.bits), ("bucket", self.bucket),
                                  ("fraction", self.fraction),
                                  ("error_feedback", self.error_feedback or None)) if v is not None}


NONE = Codec()


@dataclass(frozen=True)
class CompressionConfig:
    """``[compression]``: the ``uplink`` (what a device uploads) and ``downlink`` (what it downloads) codecs."""

    uplink: Codec = field(default_factory=Codec)
    downlink: Codec = field(default_factory=Codec)

    def __post_init__(self):
        if self.downlink.error_feedback:
            fail("downlink.error_feedback", True, "false (error feedback is a device's residual, kept for its uploads)")

    @property
    def is_none(self) -> bool:
        return self.uplink.is_none and self.downlink.is_none

    def to_dict(self) -> dict:
        return {"uplink": self.uplink.to_dict(), "downlink": self.downlink.to_dict()}


NO_COMPRESSION = CompressionConfig()


# --------------------------------------------------------------------------- the bits, exactly


def _check_sizes(sizes: Sequence[int]) -> None:
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(f"sizes: {s!r}: expected the number of values of each tensor, integers >= 0")


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


def encoded_bits(codec: Codec, sizes: Sequence[int]) -> int:
    """Exact size in bits of one transfer of tensors of ``sizes`` numbers under ``codec`` (module docstring).

    ``none``: 32·P; ``fp16``/``bf16``: 16·P; ``qsgd``: 32·Σ_t ⌈n_t/bucket⌉ + (b + 1)·P;
    ``topk``: 32·k + min(k·⌈log₂ P⌉, P), k = ⌈f·P⌉; ``sign``: 32·T + P —
    where n_t are the ``sizes``, P = Σ n_t and T counts the non-empty tensors.
    """
    _check_sizes(sizes)
    p = sum(sizes)
    t = sum(1 for s in sizes if s > 0)
    m = codec.method
    if m == "none":
        return FLOAT_BITS * p
    if m in ("fp16", "bf16"):
        return HALF_BITS * p
    if m == "qsgd":
        return FLOAT_BITS * qsgd_buckets(sizes, codec.bucket) + (codec.bits + 1) * p
    if m == "topk":
        k = topk_count(codec.fraction, p)
        return FLOAT_BITS * k + min(k * index_bits(p), p)
    if m == "sign":
        return FLOAT_BITS * t + p
    raise ValueError(f"method = {m!r}: expected one of {', '.join(METHODS)}")


def scaled_encoded_bits(codec: Codec, sizes: Sequence[int], model_bits: float, model_numbers: int) -> int:
    """The bits the clock charges: :func:`encoded_bits`, scaled by ``model_bits / (32·model_numbers)``.

    With ``[workload] model_bits = "auto"`` (32 bits per number of the model)
    the factor is exactly 1 and this *is* the encoded size; a typed
    ``model_bits`` (a paper's model size) scales the encoded size by the same
    ratio as the uncompressed transfers (``edgesim.learning.state.scaled_bits``).
    """
    bits = encoded_bits(codec, sizes)
    full = FLOAT_BITS * int(model_numbers)
    if full <= 0 or int(model_bits) == full and float(model_bits) == full:
        return bits
    return int(round(bits * float(model_bits) / full))


# --------------------------------------------------------------------------- reading the scenario


def parse_codec(value: Any, key: str) -> Codec:
    """A direction's value: a method name (``"fp16"``) or a table (``{method = "qsgd", bits = 8}``)."""
    if isinstance(value, str):
        value = {"method": value}
    if not isinstance(value, Mapping):
        fail(key, value,
             f'a method name (one of {", ".join(METHODS)}) or a table such as {{method = "qsgd", bits = 8}}')
    unknown = sorted(set(value) - set(CODEC_KEYS))
    if unknown:
        fail(f"{key}.{unknown[0]}", value[unknown[0]], f"one of the keys {', '.join(CODEC_KEYS)}")
    if "method" not in value:
        fail(key, dict(value), f'a table with a method (one of {", ".join(METHODS)})')
    try:
        return Codec(**value)
    except ValueError as e:
        raise ValueError(f"{key}.{e}") from None


def parse_compression(values: Any, base: CompressionConfig = NO_COMPRESSION) -> CompressionConfig:
    """A ``[compression]`` table (keys ``uplink``, ``downlink``; each left out takes ``base``'s)."""
    if not isinstance(values, Mapping):
        fail("compression", values, "a table with keys uplink and/or downlink")
    unknown = sorted(set(values) - set(DIRECTIONS))
    if unknown:
        fail(unknown[0], values[unknown[0]], "one of the keys uplink, downlink")
    codecs = {d: parse_codec(values[d], d) if d in values else getattr(base, d) for d in DIRECTIONS}
    return CompressionConfig(**codecs)


def build_compression(values: Any, algorithm_tables: Any, where: str) -> dict[str, CompressionConfig]:
    """``[compression]`` and each ``[algorithms.NAME.compression]`` → ``{"": default, NAME: override, ...}``.

    An algorithm's table overrides the directions it names; the others come
    from ``[compression]``. Errors are one :class:`ConfigError` line naming the
    table, the key, the value and what was expected.
    """
    try:
        default = parse_compression(values)
    except ValueError as e:
        raise ConfigError(f"{where}: [compression] {e}") from None
    out = {"": default}
    for name, table in (algorithm_tables.items() if isinstance(algorithm_tables, Mapping) else ()):
        if isinstance(table, Mapping) and "compression" in table:
            try:
                out[name] = parse_compression(table["compression"], default)
            except ValueError as e:
                raise ConfigError(f"{where}: [algorithms.{name}.compression] {e}") from None
    return out


def compression_for(settings: Mapping[str, CompressionConfig], algorithm: str) -> CompressionConfig:
    """The compression ``algorithm`` runs with: its own table's, else ``[compression]``'s, else none."""
    return settings.get(algorithm) or settings.get("") or NO_COMPRESSION


def plan_table(settings: Mapping[str, CompressionConfig], algorithms: Sequence[str], sizes: Sequence[int],
               model_bits: float) -> dict[str, dict[str, dict]]:
    """What ``edgesim plan`` shows: per algorithm that compresses, per direction, the codec's label, the bits
    of one transfer of the whole model (tensors of ``sizes`` numbers; an algorithm that sends fewer keys —
    FedPer, LG-FedAvg, FedBN — sends fewer) and their share of the uncompressed ``model_bits``."""
    out = {}
    for name in algorithms:
        cfg = compression_for(settings, name)
        if cfg.is_none:
            continue
        out[name] = {}
        for d in DIRECTIONS:
            codec = getattr(cfg, d)
            bits = scaled_encoded_bits(codec, sizes, model_bits, sum(sizes))
            out[name][d] = {"method": codec.label(), "bits": bits, "ratio": bits / float(model_bits)}
    return out
