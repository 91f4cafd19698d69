"""Named registries: one per kind of thing a scenario names (model, dataset, partition).

A :class:`Registry` maps a name to its *spec*, a frozen dataclass that holds
the thing's builder and its metadata. The registry is the single source of
the names: ``edgesim.learning.config`` validates ``[data] dataset``, ``[data]
partition`` and ``[train] model`` against it, the builders
(:func:`edgesim.learning.data.load_dataset`, :func:`edgesim.learning.context.make_partition`,
:func:`edgesim.learning.models.build_model`) look their entry up in it, and every
"unknown name" error lists its names.

The registries must be importable without torch (``edgesim plan`` and scenario
loading never import it), so each lives where its builders need nothing more
than numpy, or names its builders lazily:

- datasets: :data:`edgesim.learning.data.datasets.DATASETS` (numpy-only module; each
  entry holds its loader);
- partitions: :data:`edgesim.learning.data.partitions.PARTITIONS` (numpy-only; each
  entry holds its split function and the ``DataConfig`` fields it reads);
- models: :data:`edgesim.learning.model_specs.MODELS` (stdlib-only; each entry
  names its builder in ``edgesim.learning.models`` as ``"module:attribute"``, imported
  on first use, so torch is loaded only when a model is built);
- algorithms: :data:`edgesim.learning.algorithms.ALGORITHMS` (torch-free: names,
  config dataclasses, validation; ``edgesim.learning.algorithms.REGISTRY`` is the same
  dict, whose builders the torch modules attach with ``@register``).

This module is standard library only.
"""

from __future__ import annotations

import importlib
from typing import Callable


class Registry(dict):
    """``{name: spec}`` for one ``kind`` of thing; :meth:`lookup` fails with one line naming every choice.

    ``error`` is the exception class an unknown name raises (a ``ValueError``
    subclass, e.g. ``DatasetError``). Names keep their registration order,
    which is the order error messages list them in.
    """

    def __init__(self, kind: str, error: type[Exception] = ValueError):
        super().__init__()
        self.kind, self.error = kind, error

    def add(self, spec):
        """Register ``spec`` under ``spec.name`` (each name once); returns ``spec``."""
        if spec.name in self:
            raise ValueError(f"{self.kind} {spec.name!r} is registered twice")
        self[spec.name] = spec
        return spec

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self)

    def lookup(self, name: str):
        """The spec of ``name``; an unknown name raises ``error`` listing the registered names."""
        if name not in self:
            raise self.error(f"unknown {self.kind} {name!r}; expected one of: {', '.join(map(repr, self))}")
        return self[name]


def resolve(ref: str) -> Callable:
    """The object a lazy reference ``"package.module:attribute"`` names (imports the module)."""
    module, _, attribute = ref.partition(":")
    if not module or not attribute:
        raise ValueError(f"reference {ref!r} must be 'package.module:attribute'")
    return getattr(importlib.import_module(module), attribute)
