"""A scenario's learning sections, resolved once into types: ``[data]``, ``[train]``, ``[run]``, each algorithm's
options and each algorithm's codec.

The schema (:func:`edgesim.scenarios.schema.validate`) fills one :class:`LearningSections` per scenario
(``Scenario.learning``); everything after reads typed attributes — ``sc.learning.run.algorithms``,
``sc.learning.options("fedprox").mu``, ``sc.learning.codec("fedavg")`` — never a string key, and never re-derives
an algorithm's options or codec. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from edgesim.learning.config import DataConfig, RunConfig, TrainConfig

SECTION_NAMES = ("data", "train", "run", "algorithms", "compression", "variants", "codecs")


@dataclass(frozen=True, eq=False)
class LearningSections(Mapping):
    """The learning sections of a validated scenario (all ``None`` when it was loaded with ``learning=False``).

    ``data``, ``train``, ``run``: their config dataclasses (a physics-only run has ``data`` and ``train`` at their
    defaults and uses neither). ``algorithms``: the ``[algorithms.NAME]`` tables the scenario gives, as each
    algorithm's config (what ``config.toml`` and the error messages call its table). ``compression``: the
    ``[compression]`` settings as :func:`edgesim.compression.build_compression` reads them (``None`` for a
    physics-only run). ``variants``: the ``[variants.NAME]`` tables (:func:`edgesim.learning.config.build_variants`:
    each names its algorithm; its options are among ``algorithms`` under its own name). ``configs``: every
    algorithm the run trains — ``[run] algorithms`` (variants among them) and a warm start's —
    mapped to its config, defaults filled (:meth:`options`). ``codecs``: each of them (and each variant's
    algorithm) mapped to the compression its transfers take (:meth:`codec`), resolved once by the schema from
    the codec registry (:func:`edgesim.compression.resolve_compression`; ``None`` for a physics-only run).

    For callers written before it was typed, it is also a read-only mapping of the sections present
    (``sc.learning["run"]``); edgesim's own code reads the attributes.
    """

    data: Optional[DataConfig] = None
    train: Optional[TrainConfig] = None
    run: Optional[RunConfig] = None
    algorithms: Optional[Mapping[str, Any]] = None
    compression: Optional[Mapping[str, Any]] = None
    variants: Optional[Mapping[str, Any]] = None
    codecs: Optional[Mapping[str, Any]] = None
    configs: Mapping[str, Any] = field(default_factory=dict)

    def options(self, name: str):
        """Algorithm ``name``'s config: its ``[algorithms.NAME]`` table's, else its defaults."""
        if name in self.configs:
            return self.configs[name]
        given = (self.algorithms or {}).get(name)
        if given is not None:
            return given
        from edgesim.learning.algorithms import ALGORITHMS

        return ALGORITHMS[self.algorithm(name)].config_cls()

    def algorithm(self, name: str) -> str:
        """The registered algorithm behind ``name``: a variant's ``algorithm``, else ``name`` itself."""
        variant = (self.variants or {}).get(name)
        return variant.algorithm if variant is not None else name

    def codec(self, name: str):
        """The compression algorithm ``name``'s transfers take, as the scenario resolved it (its variant's or
        algorithm's table, else ``[compression]``; :data:`edgesim.compression.NO_COMPRESSION` for a physics-only
        run)."""
        if self.codecs is None:
            from edgesim.compression import NO_COMPRESSION

            return NO_COMPRESSION
        return self.codecs[name]

    # --- a read-only mapping of the sections present, for older callers -------------------------------------------

    def _present(self) -> tuple[str, ...]:
        return tuple(name for name in SECTION_NAMES if getattr(self, name) is not None)

    def __getitem__(self, key: str):
        if key not in self._present():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._present())

    def __len__(self) -> int:
        return len(self._present())

    def __eq__(self, other) -> bool:
        if isinstance(other, LearningSections):
            return all(getattr(self, n) == getattr(other, n) for n in (*SECTION_NAMES, "configs"))
        return Mapping.__eq__(self, other)

    __hash__ = None
