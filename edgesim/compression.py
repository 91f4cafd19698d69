"""Compressed transfers: the ``[compression]`` options of each direction and the exact encoded size, in bits.

A direction's :class:`Codec` names a registered codec (:mod:`edgesim.codecs`: one class per method, its
options, its exact size in bits, lossy or not; plugins register there too), holds that codec's options
and ``error_feedback`` (any lossy uplink method; Stich et al. 2018, Alg. 1, "memory": the device adds
what it did not send last time to its next update). :func:`encoded_bits` is the codec's ``size_bits``,
:func:`scaled_encoded_bits` what the clock charges. This module is torch-free: ``edgesim plan`` shows
the sizes without a model; the encoders and decoders are in ``edgesim.learning.compression``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .codecs import (  # noqa: F401 - FLOAT_BITS, HALF_BITS, index_bits, qsgd_buckets, topk_count: re-exported
    CODECS,
    FLOAT_BITS,
    HALF_BITS,
    index_bits,
    lossy_methods,
    methods,
    option_fields,
    qsgd_buckets,
    readers,
    topk_count,
)
from .config import Choice, ConfigError, Flag, check_key, fail, key

DIRECTIONS = ("uplink", "downlink")
BACKHAUL = "backhaul"  # the edge servers' models to and from the cloud (round_mode = "hierarchical")
SENDS_NOTHING = "nothing"  # an algorithm config's COMPRESSION when its devices send nothing (Local)


def codec_keys() -> tuple[str, ...]:
    """The keys of a direction's table: ``method``, every registered codec's options, ``error_feedback``."""
    return ("method", *option_fields(), "error_feedback")


@dataclass(frozen=True, init=False)
class Codec:
    """One direction's compression: ``method`` (a registered codec's name, :mod:`edgesim.codecs`), that codec's
    ``options`` (an instance of its class: QSGD's ``bits`` and ``bucket``, top-k's ``fraction``; read as
    ``codec.bits``) and ``error_feedback`` (carry the residual; lossy codecs only).
    ``Codec("qsgd", bits=8)``, ``Codec("topk", fraction=0.01, error_feedback=True)``."""

    method: str = key("none", "how the transfer is encoded: a registered codec (edgesim.codecs)",
                      allowed=Choice(choices=lambda value: methods()))
    options: Any = None
    error_feedback: bool = key(False, "carry the compression residual to the next round",
                               allowed=Flag(also=lambda: f"true only on the uplink, with {', '.join(lossy_methods())}"))

    def __init__(self, method: str = "none", error_feedback: bool = False, **options):
        check_key(Codec, "method", method)
        cls = CODECS[method]
        own = {f.name for f in dataclasses.fields(cls)}
        for option, value in options.items():
            if option not in own:
                others = readers(option)
                if not others:
                    fail(option, value, f"one of the keys {', '.join(codec_keys())}")
                only = " or ".join(f'method = "{m}"' for m in others)
                fail(option, value, f"left out: only {only} reads it (method = {method!r})")
        opts = cls(**options)
        check_key(Codec, "error_feedback", error_feedback)
        if error_feedback and not cls.lossy:
            fail("error_feedback", True, f"false with method = {method!r} (only {', '.join(lossy_methods())} "
                 "leave a residual to feed back)")
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "options", opts)
        object.__setattr__(self, "error_feedback", error_feedback)

    def __getattr__(self, name: str):  # an option: codec.bits is codec.options.bits
        options = self.__dict__.get("options")
        if options is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(options, name)

    @property
    def is_none(self) -> bool:
        return self.method == "none"

    def size_bits(self, sizes: Sequence[int]) -> int:
        """The exact bits of one transfer of tensors of ``sizes`` numbers (the codec's ``size_bits``)."""
        return int(self.options.size_bits(sizes))

    def label(self) -> str:
        """A short name: ``"qsgd8"``, ``"top1%+ef"``, ``"fp16"`` (the codec's ``label()``, else its name)."""
        own = getattr(self.options, "label", None)
        return (own() if callable(own) else self.method) + ("+ef" if self.error_feedback else "")

    def to_dict(self) -> dict:
        opts = {f.name: getattr(self.options, f.name) for f in dataclasses.fields(self.options)}
        return {k: v for k, v in (("method", self.method), *opts.items(),
                                  ("error_feedback", self.error_feedback or None)) if v is not None}


NONE = Codec()


@dataclass(frozen=True)
class CompressionConfig:
    """``[compression]``: the ``uplink`` (what a device uploads) and ``downlink`` (what it downloads) codecs, and
    the ``backhaul`` codec (an edge server's model to the cloud and the cloud's back, ``round_mode =
    "hierarchical"``; docs/model/hierarchy.md)."""

    uplink: Codec = field(default_factory=Codec)
    downlink: Codec = field(default_factory=Codec)
    backhaul: Codec = field(default_factory=Codec)

    def __post_init__(self):
        for direction in ("downlink", BACKHAUL):
            if getattr(self, direction).error_feedback:
                fail(f"{direction}.error_feedback", True,
                     "false (error feedback is a device's residual, kept for its uploads)")

    @property
    def is_none(self) -> bool:
        return self.devices_none and self.backhaul.is_none

    @property
    def devices_none(self) -> bool:
        """Nothing compressed between the devices and their server (the backhaul may be)."""
        return self.uplink.is_none and self.downlink.is_none

    def to_dict(self) -> dict:
        return {"uplink": self.uplink.to_dict(), "downlink": self.downlink.to_dict(),
                **({BACKHAUL: self.backhaul.to_dict()} if not self.backhaul.is_none else {})}


NO_COMPRESSION = CompressionConfig()


# --------------------------------------------------------------------------- the bits, exactly


def _check_sizes(sizes: Sequence[int]) -> None:
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(f"sizes: {s!r}: expected the number of values of each tensor, integers >= 0")


def encoded_bits(codec: Codec, sizes: Sequence[int]) -> int:
    """Exact size in bits of one transfer of tensors of ``sizes`` numbers under ``codec``: its registered codec's
    ``size_bits`` (:mod:`edgesim.codecs`; e.g. ``none``: 32·P, ``qsgd``: 32·Σ_t ⌈n_t/bucket⌉ + (b + 1)·P)."""
    _check_sizes(sizes)
    return codec.size_bits(sizes)


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
             f'a method name (one of {", ".join(methods())}) or a table such as {{method = "qsgd", bits = 8}}')
    unknown = sorted(set(value) - set(codec_keys()))
    if unknown:
        fail(f"{key}.{unknown[0]}", value[unknown[0]], f"one of the keys {', '.join(codec_keys())}")
    if "method" not in value:
        fail(key, dict(value), f'a table with a method (one of {", ".join(methods())})')
    try:
        return Codec(**value)
    except ValueError as e:
        raise ValueError(f"{key}.{e}") from None


def parse_compression(values: Any, base: CompressionConfig = NO_COMPRESSION) -> CompressionConfig:
    """A ``[compression]`` table (keys ``uplink``, ``downlink``, ``backhaul``; each left out takes ``base``'s)."""
    keys = (*DIRECTIONS, BACKHAUL)
    if not isinstance(values, Mapping):
        fail("compression", values, "a table with keys uplink, downlink and/or backhaul")
    unknown = sorted(set(values) - set(keys))
    if unknown:
        fail(unknown[0], values[unknown[0]], "one of the keys uplink, downlink, backhaul")
    codecs = {d: parse_codec(values[d], d) if d in values else getattr(base, d) for d in keys}
    return CompressionConfig(**codecs)


def build_compression(values: Any, algorithm_tables: Any, where: str) -> dict[str, CompressionConfig]:
    """``[compression]`` and each ``[algorithms.NAME.compression]`` → ``{"": default, NAME: override, ...}``
    (the tables as written; :func:`resolve_compression` gives each algorithm's).

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


def resolve_compression(settings: Mapping[str, CompressionConfig],
                        algorithms: Sequence[str]) -> dict[str, CompressionConfig]:
    """``{NAME: the compression NAME runs with}`` for each of ``algorithms``: the scenario's one resolution of each
    algorithm's codecs (:func:`compression_for` over :func:`build_compression`'s tables), read as
    ``codecs[name]`` by the run, the plan and the checks, never resolved again."""
    return {name: compression_for(settings, name) for name in algorithms}


def compression_for(settings: Mapping[str, CompressionConfig], algorithm: str) -> CompressionConfig:
    """The compression ``algorithm`` runs with: its own table's, else ``[compression]``'s, else none."""
    return settings.get(algorithm) or settings.get("") or NO_COMPRESSION


def plan_table(codecs: Mapping[str, CompressionConfig], algorithms: Sequence[str], sizes: Sequence[int],
               model_bits: float) -> dict[str, dict[str, dict]]:
    """What ``edgesim plan`` shows: per algorithm that compresses, per direction, the codec's label, the bits
    of one transfer of the whole model (tensors of ``sizes`` numbers; an algorithm that sends fewer keys —
    FedPer, LG-FedAvg, FedBN — sends fewer) and their share of the uncompressed ``model_bits``. ``codecs``:
    :func:`resolve_compression`'s, every one of ``algorithms`` resolved."""
    out = {}
    for name in algorithms:
        cfg = codecs[name]
        if cfg.is_none:
            continue
        out[name] = {}
        for d in (*DIRECTIONS, *((BACKHAUL,) if not cfg.backhaul.is_none else ())):
            codec = getattr(cfg, d)
            bits = scaled_encoded_bits(codec, sizes, model_bits, sum(sizes))
            out[name][d] = {"method": codec.label(), "bits": bits, "ratio": bits / float(model_bits)}
    return out
