"""``edgesim list``: what a scenario can name — algorithms, models, data sets, partitions, resource policies, access
schemes, association rules — with their options.

Read from the registries (plugins included, :mod:`edgesim.learning.plugins`), so the
list is always what a scenario accepts. Each option is a key of the table
that configures it: an algorithm's ``[algorithms.NAME]`` keys, a partition's
``[data]`` keys, a data set's loader options.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass
from typing import Any

KINDS = ("algorithms", "models", "datasets", "partitions", "scenarios", "policies", "access", "association")


@dataclass(frozen=True)
class Option:
    """One key: its type, default and one-line meaning (:mod:`edgesim.scenarios.reference`; ``""``: none written)."""

    name: str
    type: str
    default: Any
    meaning: str = ""


@dataclass(frozen=True)
class Entry:
    """One name a scenario can use: its one-line summary, a detail (display name, input kind, ...) and options."""

    name: str
    summary: str
    detail: str = ""
    options: tuple[Option, ...] = ()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _type_name(t) -> str:
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def dataclass_options(cls, names=None, table: str | None = None) -> tuple[Option, ...]:
    """The fields of a config dataclass (those in ``names``, in that order, if given) as options; each one's meaning
    is its field's own (:func:`edgesim.config.key`: a scheme's or a plugin's option), else the scenario reference's
    line for ``table.name`` (a ``[data]`` key), else the sentence of ``cls``'s docstring that names it."""
    from edgesim.config import key_doc
    from edgesim.scenarios.reference import field_meaning, key_meaning

    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = []
    for name in (names if names is not None else fields):
        f = fields[name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        own = key_doc(f)
        meaning = ((own.doc if own is not None else "") or (key_meaning(f"{table}.{name}") if table else "")
                   or field_meaning(cls, name))
        out.append(Option(name, _type_name(f.type), None if default is dataclasses.MISSING else default, meaning))
    return tuple(out)


def _loader_options(spec) -> tuple[Option, ...]:
    """A data set's loader options with the defaults of the function that takes them."""
    import functools

    from edgesim.learning.data.synthetic import make_synthetic

    load = spec.load.func if isinstance(spec.load, functools.partial) else spec.load
    params = dict(inspect.signature(load).parameters)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()) and spec.name == "synthetic":
        load = make_synthetic  # the lambda passes its options on: the generator's signature and docstring say them
        params = dict(inspect.signature(make_synthetic).parameters)
    out = []
    for name in spec.options:
        p = params.get(name)
        default = None if p is None or p.default is p.empty else p.default
        annotation = "" if p is None or p.annotation is p.empty else _type_name(p.annotation)
        from edgesim.scenarios.reference import field_meaning, key_meaning

        meaning = key_meaning(f"data.{name}") or field_meaning(load, name)
        out.append(Option(name, annotation or (type(default).__name__ if default is not None else ""), default, meaning))
    return tuple(out)


def catalog(kind: str) -> list[Entry]:
    """The registered entries of ``kind`` (one of :data:`KINDS`), in registration order."""
    from edgesim.learning.plugins import load_entry_points

    load_entry_points("models", "datasets", "partitions")
    if kind == "algorithms":
        from edgesim.learning.algorithms import REGISTRY

        return [Entry(s.name, s.summary, f"display: {s.display}", dataclass_options(s.config_cls))
                for s in REGISTRY.values()]
    if kind == "models":
        from edgesim.learning.model_specs import MODELS

        return [Entry(s.name, s.summary, f"input: {s.input}") for s in MODELS.values()]
    if kind == "datasets":
        from edgesim.learning.data.datasets import DATASETS

        return [Entry(s.name, s.title, f"{s.kind}; " + ("files in data_dir" if s.needs_files else "no files needed"),
                      _loader_options(s)) for s in DATASETS.values()]
    if kind == "partitions":
        from edgesim.learning.config import DataConfig
        from edgesim.learning.data.partitions import PARTITIONS

        return [Entry(s.name, s.summary, "its [data] keys:", dataclass_options(DataConfig, s.reads, "data"))
                for s in PARTITIONS.values()]
    if kind == "scenarios":
        return shipped_scenarios()
    if kind == "policies":
        load_entry_points("policies")
        import edgesim.access  # noqa: F401 - registers the resource_blocks policies
        from edgesim.resources import POLICIES, ResourcesConfig, summary

        out = []
        for key, named in POLICIES.items():
            for name, cls in named.items():
                access = getattr(cls, "access", None)
                detail = "; ".join(([f"access {' or '.join(access)}"] if access else [])
                                   + [f"needs {k} = {v!r}" for k, v in getattr(cls, "needs", {}).items()])
                out.append(Entry(f"{key}.{name}", summary(cls), detail,
                                 dataclass_options(ResourcesConfig, getattr(cls, "options", ()), "resources")))
        return out
    if kind == "access":
        load_entry_points("access")
        from edgesim.access import SCHEMES
        from edgesim.access import summary as access_summary

        out = []
        for name, cls in SCHEMES.items():
            detail = "; ".join(
                ([f"[resources] policies of {cls.policy_access}"] if cls.policy_access else [])
                + (["round modes sync, deadline, fedasync, fedbuff"] if cls.asynchronous else
                   ["round modes sync, deadline"])
                + ([] if cls.digital else ["analog: no compression"]))
            out.append(Entry(name, access_summary(cls), detail, dataclass_options(cls.Options)))
        return out
    if kind == "association":
        load_entry_points("association")
        from edgesim.cells import ASSOCIATIONS

        return [Entry(name, (rule.__doc__ or "").strip().split("\n")[0], f"{rule.__module__}.{rule.__qualname__}")
                for name, rule in ASSOCIATIONS.items()]
    raise ValueError(f"kind(={kind!r}) must be one of {KINDS}")


HOST_TIME = re.compile(r"^#\s*host time:\s*(.+?)\s*$", re.I | re.M)


def shipped_scenarios() -> list[Entry]:
    """The scenarios shipped with edgesim (``edgesim run NAME.toml`` from ``edgesim/scenarios/``): each one's
    description, scale and the host time its ``# host time:`` comment records (measured; "not measured" without)."""
    import tomllib

    from edgesim.scenarios.schema import SCENARIO_DIR

    entries = []
    for path in sorted(SCENARIO_DIR.glob("*.toml")):
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
        system, budget, run, data = (raw.get(k, {}) for k in ("system", "budget", "run", "data"))
        rounds = run.get("rounds", budget.get("rounds", "?"))
        algorithms = run.get("algorithms", ["fedavg", "fedprox", "local"])
        host = HOST_TIME.search(text)
        detail = (f"{data.get('dataset', 'digits') if run.get('backend') != 'parametric' else 'physics only'}, "
                  f"{system.get('n_devices', '?')} devices, {rounds} rounds, {len(algorithms)} algorithm(s); "
                  f"host time: {host.group(1) if host else 'not measured'}")
        entries.append(Entry(path.name, raw.get("description", ""), detail))
    return entries


def toml_value(value) -> str:
    """A default as a scenario writes it (``"samples"``, ``true``, ``[0.5, 0.7]``); ``None`` is ``(unset)``."""
    import json

    if value is None:
        return "(unset)"
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value)


def format_catalog(entries: dict[str, list[Entry]]) -> str:
    """Plain text: per kind a heading, per entry ``name  summary`` then one indented line per option."""
    lines = []
    for kind, items in entries.items():
        lines.append(f"{kind}:" if len(entries) > 1 else f"{kind} ({len(items)}):")
        for e in items:
            lines.append(f"{e.name:<22} {e.summary}" + (f"  [{e.detail}]" if e.detail else ""))
            for o in e.options:
                lines.append(f"    {o.name:<22} {o.type:<16} {toml_value(o.default):<10} {o.meaning}".rstrip())
        lines.append("")
    return "\n".join(lines).rstrip()
