"""Scenario files: TOML → validated, frozen configuration.

A scenario is a TOML file with top-level ``name``, ``description``, ``seed`` and
one table per section; each section maps onto one frozen dataclass whose
``__post_init__`` validates its values. ``--set section.key=value`` overrides
any key (the value is parsed as TOML, falling back to a plain string).

Every error is a :class:`ScenarioError` naming the file, the key, the value and
what was expected — never a traceback from deep inside.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from edgesim.config import BudgetConfig, ConfigError, SystemConfig, WorkloadConfig, build_config
from learning.config import SECTIONS as LEARNING_SECTIONS

SCENARIO_DIR = Path(__file__).resolve().parent
DEFAULT_SCENARIO = SCENARIO_DIR / "default.toml"
TOP_LEVEL_KEYS = {"name": str, "description": str, "seed": int}


ScenarioError = ConfigError


SIM_SECTIONS: dict[str, type] = {"system": SystemConfig, "budget": BudgetConfig, "workload": WorkloadConfig}


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: the simulator sections and, when built, the learning ones.

    ``learning`` maps ``data``/``train``/``run``/``algorithms`` to their configs
    (empty when the scenario was loaded for ``edgesim plan`` only).
    """

    path: str
    name: str
    description: str
    seed: int
    system: SystemConfig
    budget: BudgetConfig
    workload: WorkloadConfig
    learning: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"system.bandwidth_hz=2e6"`` → (["system", "bandwidth_hz"], 2000000.0)."""
    if "=" not in text:
        raise ScenarioError(f"--set {text!r}: expected KEY=VALUE, e.g. --set system.bandwidth_hz=2e6")
    key, value_text = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ScenarioError(f"--set {text!r}: expected a dotted key such as system.bandwidth_hz")
    try:
        value = tomllib.loads(f"v = {value_text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = value_text.strip()
    return key.split("."), value


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """A deep copy of ``raw`` with each ``--set`` applied (tables are created as needed)."""
    import copy

    out = copy.deepcopy(raw)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ScenarioError(f"--set {text!r}: {part!r} is a value, not a table")
            node = child
        node[path[-1]] = value
    return out


def read_toml(path: Path) -> dict:
    if not path.exists():
        raise ScenarioError(f"{path}: scenario file not found")
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None


def validate(raw: Mapping[str, Any], where: str, *, learning: bool = True) -> Scenario:
    """Validate a parsed scenario mapping (``where`` names the file in messages)."""
    known = set(TOP_LEVEL_KEYS) | set(SIM_SECTIONS) | set(LEARNING_SECTIONS)
    for key, value in raw.items():
        if key not in known:
            raise ScenarioError(
                f"{where}: unknown key {key!r} (= {value!r}); expected one of: {', '.join(sorted(known))}"
            )
    for key, typ in TOP_LEVEL_KEYS.items():
        if key in raw and (not isinstance(raw[key], typ) or isinstance(raw[key], bool)):
            raise ScenarioError(f"{where}: {key} = {raw[key]!r}: expected a {typ.__name__}")
    if raw.get("seed", 0) < 0:
        raise ScenarioError(f"{where}: seed = {raw['seed']!r}: expected an integer >= 0")
    built = {name: build_config(cls, raw.get(name, {}), f"{where}: [{name}]") for name, cls in SIM_SECTIONS.items()}
    learned = {}
    if learning:
        learned = {name: build(raw.get(name, {}), f"{where}: [{name}]") for name, build in LEARNING_SECTIONS.items()}
    return Scenario(
        path=where,
        name=raw.get("name", Path(where).stem),
        description=raw.get("description", ""),
        seed=int(raw.get("seed", 0)),
        raw=raw,
        learning=learned,
        **built,
    )


def resolve_paths(raw: dict, path: Path) -> dict:
    """A relative ``data.data_dir`` in a scenario file is relative to the file's own folder.

    (A ``--set data.data_dir=…`` or ``--data-dir`` on the command line is
    relative to the current directory, as any command-line path.)
    """
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("data_dir"), str) and not Path(data["data_dir"]).is_absolute():
        raw = {**raw, "data": {**data, "data_dir": str((path.resolve().parent / data["data_dir"]).resolve())}}
    return raw


def load_scenario(path: str | Path | None = None, overrides: list[str] | None = None, *, learning: bool = True) -> Scenario:
    """Read, override and validate a scenario file (default: the bundled ``default.toml``).

    ``learning=False`` validates only the simulator sections (what ``edgesim plan`` needs).
    """
    path = Path(path) if path is not None else DEFAULT_SCENARIO
    raw = resolve_paths(read_toml(path), path)
    raw = apply_overrides(raw, overrides or [])
    return validate(raw, str(path), learning=learning)
