"""The scenario keys' meanings: one line, unit and allowed range per key; ``docs/use/scenario_reference.md`` is made from it.

Every key is a field of a config dataclass (:func:`scenario_tables`) declared with :func:`edgesim.config.key`: its
meaning, unit and allowed values live in the field's metadata, and the very rule that checks a value writes its range
here (:func:`described_docs`) — nothing is written by hand in this module. Type and default come from the dataclasses
too; a compression direction's keys are :class:`edgesim.compression.Codec`'s own (``method``, ``error_feedback``) and
every registered codec's options (:mod:`edgesim.codecs`). :data:`KEY_DOCS` holds them all. ``tests/test_reference.py``
fails when a key has no description, when a rule and its check disagree, and when ``docs/use/scenario_reference.md``
differs from :func:`reference_markdown` — regenerate it with
``python -m edgesim.scenarios.reference > docs/use/scenario_reference.md``. ``edgesim list`` shows the same lines
(:func:`key_meaning`); an algorithm's options are described from its config's docstring (:func:`field_meaning`).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from edgesim.config import field_meaning  # noqa: F401 - edgesim list's meanings (defined in the core: schema uses it)

CODEC = "codec"  # scenario_tables()' mark of a compression direction: Codec's keys and the registered codecs' options
ACCESS = "access"  # scenario_tables()' mark of [access]: the registered access schemes' options


def scenario_tables() -> dict[str, type | str]:
    """Every table of a scenario (``""``: the top level; ``compression.uplink`` is ``[compression.uplink]``) and its
    config dataclass (:data:`CODEC` for a compression direction, whose keys come from the codec registry;
    :data:`ACCESS` for ``[access]``, the options of the registered access schemes)."""
    from edgesim.asynchrony import AsyncConfig
    from edgesim.availability import AvailabilityConfig
    from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
    from edgesim.curve import ParametricConfig
    from edgesim.hierarchy import HierarchyConfig
    from edgesim.learning.config import DataConfig, RunConfig, TrainConfig
    from edgesim.resources import ResourcesConfig
    from edgesim.scenarios.schema import TopLevel

    return {"": TopLevel, "system": SystemConfig, "access": ACCESS, "budget": BudgetConfig, "workload": WorkloadConfig,
            "data": DataConfig, "train": TrainConfig, "run": RunConfig, "parametric": ParametricConfig,
            "async": AsyncConfig, "availability": AvailabilityConfig, "compression.uplink": CODEC,
            "compression.downlink": CODEC, "compression.backhaul": CODEC, "resources": ResourcesConfig,
            "hierarchy": HierarchyConfig}


def table_fields(table: str) -> dict[str, dataclasses.Field]:
    """``{key: field}`` of a table (:func:`scenario_tables`), in the order the reference lists them: a dataclass's
    fields; a compression direction's ``method``, every registered codec's options, then ``error_feedback``."""
    cls = scenario_tables()[table]
    if cls == ACCESS:
        return {name: f for name, (f, _) in access_options().items()}
    if cls != CODEC:
        return {f.name: f for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    from edgesim.compression import Codec, option_fields

    own = {f.name: f for f in dataclasses.fields(Codec)}
    return {"method": own["method"], **option_fields(), "error_feedback": own["error_feedback"]}


def access_options() -> dict[str, tuple[dataclasses.Field, tuple[str, ...]]]:
    """``[access]``'s keys: every registered access scheme's option (the first scheme that declares a name gives its
    field) and the schemes that read it, ``{option: (field, schemes)}`` (:mod:`edgesim.access`)."""
    from edgesim.access import SCHEMES

    out: dict[str, tuple[dataclasses.Field, tuple[str, ...]]] = {}
    for scheme, cls in SCHEMES.items():
        for f in dataclasses.fields(cls.Options):
            field, readers = out.get(f.name, (f, ()))
            out[f.name] = (field, (*readers, scheme))
    return out


def _dotted(table: str, name: str) -> str:
    return f"{table}.{name}" if table else name


def described_docs() -> dict[str, tuple[str, str, str]]:
    """``{table.key: (meaning, unit, allowed)}`` of every scenario key, from its field's metadata
    (:func:`edgesim.config.key`): the allowed values are the text of the very rule its check runs; a codec's option
    adds which methods read it. A field without metadata gets no entry (the test that every key has one fails)."""
    from edgesim.compression import readers
    from edgesim.config import key_doc

    out = {}
    for table, cls in scenario_tables().items():
        for name, f in table_fields(table).items():
            doc = key_doc(f)
            if doc is None:
                continue
            allowed = doc.allowed.text()
            if cls == CODEC and name not in ("method", "error_feedback"):
                allowed += f" with method {' or '.join(readers(name))}; else unset"
            if cls == ACCESS:
                allowed += f" with access {' or '.join(access_options()[name][1])}; else unset"
            out[_dotted(table, name)] = (doc.doc, doc.unit, allowed)
    return out


# key -> (meaning, unit, allowed values). "" unit: none (a count, a name, a flag). All from field metadata.
KEY_DOCS: dict[str, tuple[str, str, str]] = described_docs()


def _type_name(t: Any) -> str:
    """``int``, ``number`` (int or float), ``str or list``, ...: a type as the reference writes it."""
    args = typing.get_args(t)
    if typing.get_origin(t) in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)) and args:
        parts = [_type_name(a) for a in args if a is not type(None)]
    else:
        parts = [t.__name__ if isinstance(t, type) else str(t).replace("typing.", "")]
    if "int" in parts and "float" in parts:
        parts = ["number" if p == "int" else p for p in parts if p != "float"]
    return " or ".join(dict.fromkeys(parts)) or "any"


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def scenario_keys() -> dict[str, tuple[str, Any]]:
    """Every scenario key (``table.key``; top-level ones bare) with its type name and default."""
    from edgesim.access import SCHEMES
    from edgesim.compression import CODECS, Codec

    keys: dict[str, tuple[str, Any]] = {}
    for table, cls in scenario_tables().items():
        for name, f in table_fields(table).items():
            if cls == ACCESS:
                owner = SCHEMES[access_options()[name][1][0]].Options
            elif cls == CODEC:  # method, error_feedback: the direction's own (Codec)
                owner = next((c for c in CODECS.values() if name in {g.name for g in dataclasses.fields(c)}), Codec)
            else:
                owner = cls
            hint = typing.get_type_hints(owner).get(name, f.type)
            default = "(the file's name)" if (table, name) == ("", "name") else _default(f)
            keys[_dotted(table, name)] = (_type_name(hint), default)
    return keys


def key_meaning(key: str) -> str:
    """The one-line meaning of a scenario key (``""`` when it has none)."""
    return KEY_DOCS.get(key, ("", "", ""))[0]


def _toml(value: Any) -> str:
    import json

    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        value = list(value)
    if dataclasses.is_dataclass(value):
        return "(table)"
    return json.dumps(value, ensure_ascii=False)


def reference_markdown() -> str:
    """``docs/use/scenario_reference.md``: per table, every key's meaning, unit, type, default and allowed values."""
    keys = scenario_keys()
    lines = [
        "# Scenario reference",
        "",
        "Every key a scenario file may hold: its meaning, unit, type, default and allowed values. Generated from",
        "the configuration classes — each key's field metadata, whose rule also checks each value",
        "(`edgesim/config.py`: `key`; a codec's options: its class in `edgesim/codecs.py`) — by",
        "`python -m edgesim.scenarios.reference > docs/use/scenario_reference.md`; a test fails when a key has no",
        "description, a range differs from its check, or this page is stale. The options of each algorithm",
        "(`[algorithms.NAME]`) are listed by `edgesim list algorithms` (type, default and meaning), and its page",
        "in `docs/` gives the sources.",
        "",
        "`budget.rounds` vs `run.rounds`: `budget.rounds` is G of the budget — the per-round budget is",
        "`total_time_s / rounds` (Eq. 13), which a deadline and DoFed-SPP's plan use — and the run's length when",
        "`run.rounds` is unset; `run.rounds` changes only how many rounds the run lasts, never the per-round budget.",
        "",
    ]
    groups: dict[str, list[str]] = {}
    for key in keys:
        table = key.rpartition(".")[0]
        groups.setdefault(table, []).append(key)
    for table, names in groups.items():
        lines += [f"## {'Top level' if not table else f'[{table}]'}", "",
                  "| key | meaning | unit | type | default | allowed |", "|---|---|---|---|---|---|"]
        for key in names:
            meaning, unit, allowed = KEY_DOCS.get(key, ("", "", ""))
            type_name, default = keys[key]
            cell = [f"`{key.rpartition('.')[2]}`", meaning, unit, type_name, f"`{_toml(default)}`", allowed]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cell) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - regenerates docs/use/scenario_reference.md
    print(reference_markdown(), end="")
