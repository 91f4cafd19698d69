"""Scenario files: TOML → validated, frozen configuration.

A scenario is a TOML file with top-level ``name``, ``description``, ``seed`` and
one table per section; each section maps onto one frozen dataclass whose
``__post_init__`` validates its values. ``--set section.key=value`` overrides
any key (the value is parsed as TOML, falling back to a plain string; an
unquoted ``a,b`` or a bare word for a list key is a list:
``--set run.algorithms=fedavg,fedprox``).

A data set that needs files and has no ``data.data_dir`` takes the
``EDGESIM_DATA`` environment variable (the shipped scenarios name no folder).

Every error is a :class:`ScenarioError` naming the file, the key, the value and
what was expected — never a traceback from deep inside.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from edgesim.async_rules import SYNC_MODES, is_asynchronous, is_hierarchical, round_modes
from edgesim.asynchrony import AsyncConfig, check_async_system
from edgesim.availability import AvailabilityConfig, read_trace
from edgesim.cells import ASSOCIATIONS
from edgesim.compression import build_compression, compression_for, resolve_compression
from edgesim.config import (
    BudgetConfig,
    ConfigError,
    Integer,
    SystemConfig,
    Text,
    WorkloadConfig,
    build_config,
    check_keys,
)
from edgesim.config import key as scenario_key
from edgesim.curve import ParametricConfig
from edgesim.hierarchy import HierarchyConfig, check_hierarchy, n_cells
from edgesim.learning.config import PARAMETRIC, RunConfig
from edgesim.learning.config import SECTIONS as LEARNING_SECTIONS
from edgesim.resources import ResourcesConfig
from edgesim.scenarios.feasibility import check_scenario_ends
from edgesim.scenarios.sections import LearningSections

SCENARIO_DIR = Path(__file__).resolve().parent
DEFAULT_SCENARIO = SCENARIO_DIR / "default.toml"
MAX_SEED = 2**63 - 1  # a TOML integer; the random streams take (seed, ...) tuples of such


@dataclass(frozen=True)
class TopLevel:
    """A scenario file's own keys, outside every table (each described once: :func:`edgesim.config.key`)."""

    name: Optional[str] = scenario_key(None, "the scenario's name: the default run folder is runs/<name>",
                              allowed=Text(words="a non-empty folder name", optional=True))  # its form: validate()
    description: str = scenario_key("", "one line saying what the scenario studies (shown by `edgesim list scenarios`)",
                           allowed=Text(words="text", nonempty=False))
    seed: int = scenario_key(0, "the seed every random stream of the run derives from (placement, data split, training)",
                    allowed=Integer(0, MAX_SEED, expected="an integer in [0, 2**63 - 1]"))

    def __post_init__(self):
        check_keys(self)


TOP_LEVEL_KEYS = tuple(f.name for f in dataclasses.fields(TopLevel))


ScenarioError = ConfigError


SIM_SECTIONS: dict[str, type] = {"system": SystemConfig, "budget": BudgetConfig, "workload": WorkloadConfig}
# Tables a physics-only run ([run] backend = "parametric") does not use, and so refuses.
TORCH_ONLY_SECTIONS = ("data", "train", "algorithms", "compression", "variants")


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: the simulator sections and, when built, the learning ones.

    ``learning``: the learning sections resolved into types (:class:`edgesim.scenarios.sections.LearningSections`:
    ``data``, ``train``, ``run``, each algorithm's options and codec; all ``None`` when the scenario was loaded
    with ``learning=False``).
    ``parametric`` is the ``[parametric]`` table (used when ``[run] backend =
    "parametric"``: a physics-only run).
    """

    path: str
    name: str
    description: str
    seed: int
    system: SystemConfig
    budget: BudgetConfig
    workload: WorkloadConfig
    learning: LearningSections = field(default_factory=LearningSections)
    raw: Mapping[str, Any] = field(default_factory=dict)
    parametric: ParametricConfig = field(default_factory=ParametricConfig)
    asynchrony: AsyncConfig = field(default_factory=AsyncConfig)
    availability: AvailabilityConfig = field(default_factory=AvailabilityConfig)
    hierarchy: HierarchyConfig = field(default_factory=HierarchyConfig)

    @property
    def asynchronous(self) -> bool:
        """A ``round_mode = "fedasync"`` or ``"fedbuff"`` run (its ``[async]`` table in force)."""
        return is_asynchronous(self.budget.round_mode)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    access: Any = None  # the [access] table as [system] access's Options (edgesim.access)

    @property
    def physics_only(self) -> bool:
        """A ``[run] backend = "parametric"`` scenario: the clock alone, no torch."""
        run = self.learning.run
        return run is not None and run.backend == PARAMETRIC


def parse_override(text: str, option: str = "set") -> tuple[list[str], Any]:
    """``"system.bandwidth_hz=2e6"`` → (["system", "bandwidth_hz"], 2000000.0); ``option`` names it in errors."""
    if "=" not in text:
        raise ScenarioError(f"⟨{option}=⟩{text!r}: expected KEY=VALUE, e.g. ⟨{option}=⟩system.bandwidth_hz=2e6")
    key, value_text = text.split("=", 1)
    key = key.strip()
    if not key or any(not part.strip() for part in key.split(".")):
        raise ScenarioError(f"⟨{option}=⟩{text!r}: expected a dotted key such as system.bandwidth_hz before '='")
    return key.split("."), parse_value(value_text)


def parse_value(text: str) -> Any:
    """A command-line value: TOML (``2e6``, ``true``, ``["a", "b"]``, ``"x"``), else an unquoted list
    (``a,b`` or ``[a, b]``: each item TOML or a plain string), else the plain string."""
    text = text.strip()
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if "," in inner or inner is not text:
        return [parse_value(item) for item in inner.split(",") if item.strip()]
    return text


def list_keys() -> set[str]:
    """``section.key`` of every list-valued scenario key (a bare word given for one becomes a one-item list)."""
    from edgesim.learning.config import DataConfig, RunConfig, TrainConfig

    classes = {**SIM_SECTIONS, "data": DataConfig, "train": TrainConfig, "run": RunConfig}
    return {f"{section}.{f.name}" for section, cls in classes.items() for f in dataclasses.fields(cls)
            if f.default_factory is not dataclasses.MISSING and isinstance(f.default_factory(), list)}


def apply_overrides(raw: dict, overrides: list[str], options: list[str] | None = None) -> dict:
    """A deep copy of ``raw`` with each ``--set`` applied (tables are created as needed).

    ``options`` names the option of each override in errors (default ``set``, marked for the front ends:
    :data:`edgesim.config.MARK`).
    """
    import copy

    out = copy.deepcopy(raw)
    for text, option in zip(overrides, options or ["set"] * len(overrides)):
        path, value = parse_override(text, option)
        node = out
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ScenarioError(f"⟨{option}=⟩{text!r}: {part!r} is a value ({child!r}), not a table")
            node = child
        if isinstance(value, str) and ".".join(path) in list_keys():
            value = [value]
        if isinstance(node.get(path[-1]), dict) and not isinstance(value, dict):
            raise ScenarioError(f"⟨{option}=⟩{text!r}: {'.'.join(path)} is a table, not a value; "
                                f"expected a key inside it, such as {'.'.join(path)}.KEY=VALUE")
        node[path[-1]] = value
    return out


def read_toml(path: Path) -> dict:
    """A scenario file parsed; one clear error for a missing, unreadable, non-UTF-8 or invalid file."""
    if not path.exists():
        raise ScenarioError(f"{path}: scenario file not found; expected the path of a .toml scenario")
    if path.is_dir():
        raise ScenarioError(f"{path}: is a folder; expected the path of a .toml scenario file")
    try:
        with open(path, "rb") as f:
            return tomllib.loads(f.read().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not a UTF-8 text file (byte {e.start}); expected a TOML scenario") from None
    except OSError as e:
        raise ScenarioError(f"{path}: cannot be read ({e.strerror or e}); expected a readable TOML scenario") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None


def validate(raw: Mapping[str, Any], where: str, *, learning: bool = True) -> Scenario:
    """Validate a parsed scenario mapping (``where`` names the file in messages)."""
    known = set(TOP_LEVEL_KEYS) | set(SIM_SECTIONS) | set(LEARNING_SECTIONS) | {"parametric", "compression", "async",
                                                                                "availability", "resources", "variants",
                                                                                "access", "hierarchy"}
    for key, value in raw.items():
        if key not in known:
            raise ScenarioError(
                f"{where}: unknown key {key!r} (= {value!r}); expected one of: {', '.join(sorted(known))}"
            )
    build_config(TopLevel, {k: v for k, v in raw.items() if k in TOP_LEVEL_KEYS}, where)
    name = raw.get("name", Path(where).stem)
    if (not name.strip() or name.strip() in (".", "..") or any(c in name for c in "/\\") or name != name.strip()
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):  # control characters (NUL, BEL, newline)
        raise ScenarioError(f"{where}: name = {name!r}: expected a non-empty name usable as a folder name "
                            f"(the default run folder is runs/<name>), such as \"my_scenario\"")
    if learning:  # a plugin's access scheme is registered before [system] names it
        load_plugins(build_config(RunConfig, raw.get("run", {}), f"{where}: [run]").plugins, where, ())
    load_access_plugins(raw.get("system", {}))
    built = {name: build_config(cls, raw.get(name, {}), f"{where}: [{name}]") for name, cls in SIM_SECTIONS.items()}
    access = check_access(built["system"], built["budget"], raw.get("access"), raw.get("run", {}), where,
                          (raw.get("availability") or {}).get("model") if isinstance(raw.get("availability"), dict)
                          else None)
    parametric = build_config(ParametricConfig, raw.get("parametric", {}), f"{where}: [parametric]")
    asynchrony = build_config(AsyncConfig, raw.get("async", {}), f"{where}: [async]")
    availability = build_config(AvailabilityConfig, raw.get("availability", {}), f"{where}: [availability]")
    check_input_path(availability.trace, "availability", "trace", where)
    if not learning:
        check_asynchrony(built["system"], built["budget"], asynchrony, availability, where)
    resources = build_config(ResourcesConfig, raw.get("resources", {}), f"{where}: [resources]")
    hierarchy = build_config(HierarchyConfig, raw.get("hierarchy", {}), f"{where}: [hierarchy]")
    if "hierarchy" in raw and not is_hierarchical(built["budget"].round_mode):
        raise ScenarioError(f"{where}: [hierarchy] is used only by [budget] round_mode = 'hierarchical' (this run's "
                            f"is {built['budget'].round_mode!r}); expected it left out, or that round mode")
    learned = {}
    if learning:
        run = build_config(RunConfig, raw.get("run", {}), f"{where}: [run]")
        tables = raw.get("algorithms", {})
        variant_tables = raw.get("variants", {}) if isinstance(raw.get("variants", {}), dict) else {}
        named = [a for a in run.algorithms if a not in variant_tables]  # a variant's own algorithm is named in it
        bases = [t.get("algorithm") for t in variant_tables.values() if isinstance(t, dict)]
        load_plugins(run.plugins, where, [*named, *bases, *(tables if isinstance(tables, dict) else ())])
        physics_only = run.backend == PARAMETRIC
        if physics_only:
            w = built["workload"]
            for key in ("model_bits", "samples_per_device", "sr_cycles", "pseudo_label_cycles_per_model"):
                if getattr(w, key) == "auto":
                    unset = "" if key in raw.get("workload", {}) else " (the default: unset)"
                    what = "no data to count" if key == "samples_per_device" else "no model to size"
                    raise ScenarioError(f"{where}: [workload] {key} = 'auto'{unset}: a physics-only run has {what}; "
                                        f"expected a number")
            if w.cycles_source != "given":
                raise ScenarioError(f"{where}: [workload] cycles_source = {w.cycles_source!r}: a physics-only run "
                                    f"has no model to count FLOPs of; expected 'given'")
            for section in TORCH_ONLY_SECTIONS:
                if section in raw:
                    raise ScenarioError(f"{where}: [{section}] is not used by a physics-only run "
                                        f"([run] backend = \"parametric\"); expected it left out")
        if not physics_only and built["workload"].per_device:
            w = built["workload"]
            key = "cycles_per_sample" if not isinstance(w.cycles_per_sample, (int, float)) else "samples_per_device"
            raise ScenarioError(f"{where}: [workload] {key} = {getattr(w, key)!r}: per-device values apply to a "
                                f"physics-only run ([run] backend = \"parametric\"; a learning run's D_k comes from "
                                f"its partition); expected a number")
        if not physics_only and "parametric" in raw:
            raise ScenarioError(f"{where}: [parametric] is used only by a physics-only run ([run] backend = "
                                f"\"parametric\"); this run has backend = {run.backend!r}: expected it left out")
        learned = {name: build(raw.get(name, {}), f"{where}: [{name}]")
                   for name, build in LEARNING_SECTIONS.items() if not (physics_only and name == "algorithms")}
        learned.setdefault("algorithms", {})
        for key in ("data_dir", "file"):
            check_input_path(getattr(learned["data"], key, None), "data", key, where)
        if not physics_only:  # {"": [compression], NAME: [algorithms.NAME.compression], ...}
            load_codecs(raw)
            learned["compression"] = build_compression(raw.get("compression", {}), raw.get("algorithms", {}), where)
            add_variants(learned, built["budget"], raw.get("variants", {}), raw.get("algorithms", {}), where)
            run = learned["run"]  # {NAME: the compression NAME runs with}, every algorithm's, resolved once here
            learned["codecs"] = resolve_compression(learned["compression"], dict.fromkeys([
                *run.algorithms, *([run.warm_start["algorithm"]] if run.warm_start else []),
                *(v.algorithm for v in learned["variants"].values())]))
        check_cross_section(built["system"], learned["run"], where)
        check_evaluation_fits(built["system"], built["budget"], learned["run"], where)
        asynchrony = asynchrony.resolved(learned["run"].clients_per_round)
        check_asynchrony(built["system"], built["budget"], asynchrony, availability, where)
        if not physics_only:
            check_algorithms(built["system"], learned, where)
            check_local_iterations(built["workload"], built["system"], learned, where)
            check_async_algorithms(built["budget"], learned, where)
            check_warm_start(built["system"], built["budget"], learned, where)
            check_access_learning(built["system"], learned, where)
            check_hierarchical_algorithms(built["budget"], learned, where)
    check_workload_lengths(built["workload"], built["system"], where)
    check_resources(resources, built["system"], built["budget"], learned.get("run"), where, learned)
    run_rounds = learned["run"].rounds if learned.get("run") is not None else None
    if is_hierarchical(built["budget"].round_mode):
        if learning and learned["run"].backend == PARAMETRIC:
            raise ScenarioError(f"{where}: [budget] round_mode = 'hierarchical': the parametric backend has no "
                                f"edge or cloud model; expected [run] backend = \"torch\" (the FedAvg family)")
        try:
            check_hierarchy(hierarchy, n_cells(built["system"]), run_rounds or built["budget"].rounds, resources,
                            built["system"])
        except ConfigError as e:
            raise e.at(f"{where}: [hierarchy]" if e.key in ("edge_rounds", "backhaul_bps", "backhaul_latency_s")
                       else f"{where}: [{'resources' if e.key == 'scheduling' else 'system'}]") from None
    check_scenario_ends(built["system"], built["budget"], asynchrony, availability, resources, run_rounds, where)
    return Scenario(
        path=where,
        name=name,
        description=raw.get("description", ""),
        seed=int(raw.get("seed", 0)),
        raw=raw,
        learning=sections(learned),
        parametric=parametric,
        asynchrony=asynchrony,
        availability=availability,
        hierarchy=hierarchy,
        resources=resources,
        access=access,
        **built,
    )


def add_variants(learned: dict, budget: BudgetConfig, values, algorithm_tables, where: str) -> None:
    """``[variants.NAME]`` into the learning sections: each variant's config beside the algorithms' (under its
    name), its compression (its own table over its algorithm's), and its name appended to ``[run] algorithms``
    when not listed there (so every variant runs; listing it sets its place). A variant's ``round_mode`` stays
    within the run's kind of clock: rounds (``sync``, ``deadline``) or asynchronous (``fedasync``, ``fedbuff``),
    whose ``devices.csv`` columns and ``[async]`` table are the run's."""
    from edgesim.compression import parse_compression
    from edgesim.learning.config import build_variants

    variants, configs = build_variants(values, algorithm_tables, where)
    learned["variants"] = variants
    learned["algorithms"].update(configs)
    for name, v in variants.items():
        at = f"{where}: [variants.{name}]"
        if v.compression is not None:
            try:
                learned["compression"][name] = parse_compression(v.compression,
                                                                 compression_for(learned["compression"], v.algorithm))
            except ValueError as e:
                raise ScenarioError(f"{where}: [variants.{name}.compression] {e}") from None
        elif v.algorithm in learned["compression"]:
            learned["compression"][name] = learned["compression"][v.algorithm]
        if v.round_mode is not None:
            asynchronous = tuple(m for m in round_modes() if is_asynchronous(m))
            family = asynchronous if is_asynchronous(budget.round_mode) else \
                (budget.round_mode,) if is_hierarchical(budget.round_mode) else SYNC_MODES
            if v.round_mode not in family:
                raise ScenarioError(f"{at}: round_mode = {v.round_mode!r}: expected one of "
                                    f"{', '.join(map(repr, family))} (the run's [budget] round_mode is "
                                    f"{budget.round_mode!r}: a run's algorithms share one kind of clock, round by "
                                    f"round or asynchronous; compare the two kinds with two runs drawn on one "
                                    f"figure, docs/use/concepts.md)")
            try:
                dataclasses.replace(budget, round_mode=v.round_mode)
            except ConfigError as e:
                raise e.at(at) from None
    run = learned["run"]
    extra = [n for n in variants if n not in run.algorithms]
    if extra:
        learned["run"] = dataclasses.replace(run, algorithms=[*run.algorithms, *extra])


def variant_budget(budget: BudgetConfig, learned: Mapping[str, Any], name: str) -> BudgetConfig:
    """The ``[budget]`` algorithm ``name`` runs under: the run's, with a variant's own ``round_mode``."""
    variant = learned.get("variants", {}).get(name)
    if variant is None or variant.round_mode is None or variant.round_mode == budget.round_mode:
        return budget
    return dataclasses.replace(budget, round_mode=variant.round_mode)


NAME_MAX = 255  # the longest name of one file or folder on Linux, macOS and Windows file systems (bytes)


def check_input_path(value: Any, table: str, key: str, where: str) -> None:
    """A path the run only reads (``[data] data_dir``, ``file``, ``[availability] trace``) whose name no file system
    can hold is one line naming the key, before anything is read or written (not a write error from deep inside)."""
    if not isinstance(value, str):
        return
    too_long = next((part for part in Path(value).parts if len(part.encode()) > NAME_MAX), None)
    if too_long is not None:
        shown = too_long if len(too_long) <= 40 else too_long[:37] + "..."
        raise ScenarioError(f"{where}: [{table}] {key}: the name {shown!r} has {len(too_long.encode())} bytes; "
                            f"expected the path of an existing file or folder, each name at most {NAME_MAX} bytes")


def sections(learned: Mapping[str, Any]) -> LearningSections:
    """The validated learning sections as one typed object: each algorithm the run trains (``[run] algorithms``
    and a warm start's) with its config, defaults filled, and its codec (the codecs :func:`validate` resolved)."""
    if not learned:
        return LearningSections()
    run, tables, compression = learned["run"], learned["algorithms"], learned.get("compression")
    names = [] if run.backend == PARAMETRIC else [*run.algorithms, *([run.warm_start["algorithm"]]
                                                                      if run.warm_start else [])]
    from edgesim.learning.algorithms import ALGORITHMS

    variants = learned.get("variants", {})
    configs = {name: tables.get(name) or ALGORITHMS[variants[name].algorithm if name in variants else name].config_cls()
               for name in dict.fromkeys(names)}
    return LearningSections(data=learned["data"], train=learned["train"], run=run, algorithms=tables,
                            compression=compression, variants=variants, configs=configs,
                            codecs=learned.get("codecs"))  # resolved once above (resolve_compression)


def check_access_learning(system: SystemConfig, learned: Mapping[str, Any], where: str) -> None:
    """An analog access scheme (AirComp) with the learning side: no digital compression (its airtime follows the
    parameter count, not bits), and only algorithms whose upload is averaged as a parameter vector (the FedAvg
    family, whose aggregate carries the channel's noise: :func:`edgesim.learning.aggregation.over_the_air_average`)."""
    from edgesim.access import scheme_class
    from edgesim.compression import NO_COMPRESSION
    from edgesim.learning.algorithms import ALGORITHMS, asynchronous_algorithms

    cls = scheme_class(system.access)
    variants = learned.get("variants", {})
    for name in learned["run"].algorithms:
        algorithm = variants[name].algorithm if name in variants else name  # a variant: its algorithm's family
        if not cls.digital and compression_for(learned.get("compression", {}), name) != NO_COMPRESSION:
            raise ScenarioError(f"{where}: [compression] for {name!r}: access = {system.access!r} sends analog "
                                f"symbols, one per parameter, so digital compression (bits) does not apply; expected "
                                f"no compression with access = {system.access!r}")
        if cls.over_the_air and (algorithm not in ALGORITHMS or not ALGORITHMS[algorithm].asynchronous):
            raise ScenarioError(
                f"{where}: [run] algorithms: {name!r} with access = {system.access!r}: the base station receives "
                f"only the sum of the round's uploads, which serves algorithms whose upload is averaged as one "
                f"parameter vector — the FedAvg family ({', '.join(asynchronous_algorithms())}); expected one of "
                f"them, or another access scheme for {name!r}")


def load_access_plugins(system_table) -> None:
    """The installed access-scheme plugins (entry-point group ``edgesim.access``), loaded when ``[system] access``
    names a scheme not registered yet; the same for ``[system] association`` (group ``edgesim.association``)."""
    from edgesim.access import SCHEMES

    name = system_table.get("access") if isinstance(system_table, Mapping) else None
    if isinstance(name, str) and name not in SCHEMES:
        from edgesim.learning.plugins import load_entry_points

        load_entry_points("access")
    rule = system_table.get("association") if isinstance(system_table, Mapping) else None
    if isinstance(rule, str) and rule not in ASSOCIATIONS:  # a plugin's association rule (edgesim.cells)
        from edgesim.learning.plugins import load_entry_points

        load_entry_points("association")


def check_access(system: SystemConfig, budget: BudgetConfig, table, run_table, where: str,
                 availability_model: Any = None):
    """``[access]``: the options of ``[system] access``'s scheme (its own frozen dataclass; an option of another
    scheme is named as such), fit for the cell and the round mode (the scheme's ``check`` and ``asynchronous``)."""
    from edgesim.access import build_options, scheme_class
    from edgesim.asynchrony import check_async_access

    options = build_options(system.access, table, f"{where}: [access]")
    per_round = run_table.get("clients_per_round") if isinstance(run_table, Mapping) else None
    per_round = per_round if isinstance(per_round, int) and not isinstance(per_round, bool) else None
    try:
        if is_asynchronous(budget.round_mode):
            check_async_access(system.access, budget.round_mode)
        if scheme_class(system.access).over_the_air and availability_model not in (None, "always"):
            raise ValueError(f"access = {system.access!r} with [availability] model = {availability_model!r}: the "
                             f"round's devices transmit at once, and one that goes offline mid-round would hold the "
                             f"others back; expected [availability] model = 'always'")
        scheme_class(system.access).check(options, system, per_round, budget.round_mode)
        if system.n_cells > 1 and not callable(getattr(scheme_class(system.access), "set_noise_psd", None)):
            raise ValueError(f"access = {system.access!r} with {system.n_cells} cells: the scheme does not model "
                             f"inter-cell interference (no set_noise_psd: docs/model/system_model.md, Inter-cell "
                             f"interference); expected one that does (every built-in scheme does), or one "
                             f"cell")
    except ConfigError as e:
        raise e.at(f"{where}: [access]") from None
    except ValueError as e:
        raise ScenarioError(f"{where}: [access] {e}") from None
    return options


def check_asynchrony(system: SystemConfig, budget: BudgetConfig, asynchrony: AsyncConfig,
                     availability: AvailabilityConfig, where: str) -> None:
    """``[async]`` fits the cell (concurrency <= N) and a trace file of ``[availability]`` reads cleanly (every row
    checked now, before any work); an asynchronous run has none of ``[system]``'s settings for rounds only
    (:func:`edgesim.asynchrony.check_async_system`)."""
    if is_asynchronous(budget.round_mode) and (asynchrony.concurrency or 0) > system.n_devices:
        raise ScenarioError(f"{where}: [async] concurrency = {asynchrony.concurrency}: expected at most [system] "
                            f"n_devices (= {system.n_devices}); a device trains one update at a time")
    if is_asynchronous(budget.round_mode):
        try:
            check_async_system(system, budget)
        except ValueError as e:
            raise ScenarioError(f"{where}: {e}") from None  # e names system.KEY
    if availability.model == "trace":
        read_trace(Path(availability.trace), system.n_devices)


def check_async_algorithms(budget: BudgetConfig, learned: Mapping[str, Any], where: str) -> None:
    """An asynchronous run's algorithms are of the FedAvg family (the others are refused in one line)."""
    if not is_asynchronous(budget.round_mode):
        return
    from edgesim.learning.algorithms import ALGORITHMS, asynchronous_algorithms
    from edgesim.learning.config import algorithm_of

    if learned["run"].warm_start is not None:
        raise ScenarioError(f"{where}: [run] warm_start = {learned['run'].warm_start!r}: a warm start's rounds are "
                            f"synchronous; expected no warm start with [budget] round_mode = {budget.round_mode!r}")
    from edgesim.compression import NO_COMPRESSION

    for name in learned["run"].algorithms:
        if learned["codecs"][name] != NO_COMPRESSION:
            raise ScenarioError(f"{where}: [compression] for {name!r}: compressed transfers are not simulated in "
                                f"asynchronous runs yet ([budget] round_mode = {budget.round_mode!r}); expected no "
                                f"compression, or round_mode 'sync' or 'deadline'")
        base = algorithm_of(learned, name)
        if base not in ALGORITHMS or not ALGORITHMS[base].asynchronous:
            raise ScenarioError(
                f"{where}: [run] algorithms: {name!r} has no asynchronous mode ([budget] round_mode = "
                f"{budget.round_mode!r}): FedAsync and FedBuff combine independent device updates of one shared "
                f"model, which only the FedAvg family does ({', '.join(asynchronous_algorithms())}); expected round_mode 'sync' or "
                f"'deadline' for {name!r}")


def check_hierarchical_algorithms(budget: BudgetConfig, learned: Mapping[str, Any], where: str) -> None:
    """A hierarchical run's algorithms declare a hierarchical form (HierFAVG's; the others are refused in one line),
    and a backhaul codec is set only for a hierarchical run."""
    from edgesim.learning.algorithms import ALGORITHMS, hierarchical_algorithms
    from edgesim.learning.config import algorithm_of

    hierarchical = is_hierarchical(budget.round_mode)
    for name in learned["run"].algorithms:
        codec = learned["codecs"][name].backhaul
        if not codec.is_none and not hierarchical:
            raise ScenarioError(f"{where}: [compression] backhaul = {codec.label()!r} for {name!r}: only a run with "
                                f"[budget] round_mode = 'hierarchical' has a backhaul; expected it left out")
        base = algorithm_of(learned, name)
        if hierarchical and (base not in ALGORITHMS or not ALGORITHMS[base].hierarchical):
            raise ScenarioError(
                f"{where}: [run] algorithms: {name!r} has no hierarchical form ([budget] round_mode = "
                f"'hierarchical'): HierFAVG averages one shared model at the edge servers and the cloud, which only "
                f"the algorithms that declare it do ({', '.join(hierarchical_algorithms())}); expected one of them "
                f"or another round_mode for {name!r}")
    if hierarchical and learned["run"].warm_start is not None:
        raise ScenarioError(f"{where}: [run] warm_start = {learned['run'].warm_start!r}: a warm start's rounds are "
                            f"flat; expected no warm start with [budget] round_mode = 'hierarchical'")


def load_plugins(modules, where: str, algorithms=()) -> None:
    """The installed plugins' models, data sets and partitions, and the scenario's ``[run] plugins`` modules (looked
    for beside the scenario file ``where`` first, then on the Python path), registered before the sections that
    name them are validated (:mod:`edgesim.learning.plugins`). The installed algorithm plugins are loaded only
    when the scenario names an algorithm that is not declared yet (such a plugin's module may import torch; a
    scenario of the built-in algorithms never does)."""
    from edgesim.learning.algorithms import ALGORITHMS
    from edgesim.learning.plugins import import_plugins, load_entry_points

    load_entry_points("models", "datasets", "partitions")
    import_plugins(modules, where, scenario_folder(where))
    if any(isinstance(a, str) and a not in ALGORITHMS for a in algorithms):
        load_entry_points("algorithms")


def load_codecs(raw: Mapping[str, Any]) -> None:
    """The installed codec plugins (entry point group ``edgesim.codecs``), loaded only when the scenario's
    ``[compression]`` tables name a codec that is not registered yet (:mod:`edgesim.codecs`)."""
    from edgesim.codecs import CODECS

    algorithms = raw.get("algorithms")
    tables = [raw.get("compression"), *(t.get("compression") for t in (
        algorithms.values() if isinstance(algorithms, Mapping) else ()) if isinstance(t, Mapping))]
    named = set()
    for table in tables:
        for value in (table.values() if isinstance(table, Mapping) else ()):
            method = value.get("method") if isinstance(value, Mapping) else value
            if isinstance(method, str):
                named.add(method)
    if named - set(CODECS):
        from edgesim.learning.plugins import load_entry_points

        load_entry_points("codecs")


def scenario_folder(where: str) -> Path | None:
    """The folder of the scenario file ``where`` (``None`` when ``where`` names no file: a scenario given as a
    dict)."""
    path = Path(where)
    return path.resolve().parent if path.is_file() else None



def check_resources(resources: ResourcesConfig, system: SystemConfig, budget: BudgetConfig, run, where: str,
                    learned: Mapping[str, Any] | None = None) -> None:
    """``[resources]``: every policy known (installed policy plugins loaded first when one is not), fit for the
    access scheme and the algorithms (:func:`edgesim.resources.check_config`; a variant is its algorithm, of the
    ``learned`` sections) and for the round mode, from what each policy declares
    (:func:`edgesim.resources.check_round_mode`)."""
    from edgesim.learning.config import algorithm_of
    from edgesim.learning.plugins import load_entry_points
    from edgesim.learning.registry import choosing_devices
    from edgesim.resources import KINDS, POLICIES, check_config, check_round_mode

    if any(getattr(resources, kind) not in POLICIES[kind] for kind in KINDS):
        load_entry_points("policies")
    names = list(getattr(run, "algorithms", ()))
    choosing = [a for a in names if algorithm_of(learned or {}, a) in choosing_devices()]
    try:  # the algorithms that choose their own devices say so in their declaration
        check_config(resources, system, names, choosing)
        check_round_mode(resources, budget.round_mode, is_asynchronous(budget.round_mode), budget.deadline_s)
    except ValueError as e:
        raise ScenarioError(f"{where}: [resources] {e}") from None


def check_cross_section(system: SystemConfig, run, where: str) -> None:
    """Checks that span sections: K <= N."""
    if run.clients_per_round > system.n_devices:
        raise ScenarioError(
            f"{where}: [run] clients_per_round = {run.clients_per_round}: expected at most [system] n_devices "
            f"(= {system.n_devices}); a round cannot select more devices than the cell has"
        )


def check_evaluation_fits(system: SystemConfig, budget: BudgetConfig, run, where: str) -> None:
    """``[run] eval_every`` at most the run's rounds (else only the last round would be evaluated: refused, as a
    typo is more likely than the intent) and an ``eval_devices`` count at most ``n_devices``."""
    rounds = run.rounds or budget.rounds
    if run.eval_every is not None and run.eval_every > rounds:
        source = "[run] rounds" if run.rounds else "[budget] rounds"
        raise ScenarioError(f"{where}: [run] eval_every = {run.eval_every!r}: expected at most the run's rounds "
                            f"({source} = {rounds}); the last round is always evaluated")
    d = run.eval_devices
    if isinstance(d, int) and not isinstance(d, bool) and d > system.n_devices:
        raise ScenarioError(f"{where}: [run] eval_devices = {d!r}: expected at most [system] n_devices "
                            f"(= {system.n_devices}), \"all\" or a fraction in (0, 1]")


DATA_ENV = "EDGESIM_DATA"


def data_dir_from_env(raw: dict) -> dict:
    """``data.data_dir`` from ``$EDGESIM_DATA`` when the data set needs files and the scenario names no folder
    (absolute, so the recorded ``config.toml`` reproduces the run from anywhere)."""
    env = os.environ.get(DATA_ENV)
    data = raw.get("data", {})
    if not env or not isinstance(data, dict) or data.get("data_dir") is not None:
        return raw
    from edgesim.learning.data.datasets import DATASETS

    dataset = data.get("dataset", "digits")
    spec = DATASETS.get(dataset) if isinstance(dataset, str) else None  # a bad value is [data]'s to refuse
    if spec is None or not spec.needs_files:
        return raw
    return {**raw, "data": {**data, "data_dir": str(Path(env).expanduser().resolve())}}


def check_workload_lengths(workload, system: SystemConfig, where: str) -> None:
    """A per-device ``[workload]`` list has one value per device (``n_devices``): one line otherwise."""
    from edgesim.config import iterations_per_device, workload_per_device

    if workload.varies:
        try:
            if workload.per_device:
                workload_per_device(workload, system.n_devices, 0)
            iterations_per_device(workload, system.n_devices, 0)
        except ValueError as e:
            raise ScenarioError(f"{where}: [workload] {e}") from None


def check_local_iterations(workload, system: SystemConfig, learned: Mapping[str, Any], where: str) -> None:
    """``workload.local_iterations`` per device (a list or a table) in a learning run: every algorithm that trains
    (each of ``[run] algorithms``, a variant's own, the warm start's) declares ``per_device_iterations`` — it trains
    and charges each device its own I_k; one line naming the first that does not."""
    if not workload.iterations_vary:
        return
    check_workload_lengths(workload, system, where)
    from edgesim.learning.config import algorithm_of
    from edgesim.learning.registry import per_device_iteration_algorithms

    run = learned["run"]
    taking = per_device_iteration_algorithms()
    names = [*run.algorithms, *([run.warm_start["algorithm"]] if run.warm_start else [])]
    for name in names:
        if algorithm_of(learned, name) not in taking:
            some = ", ".join(taking[:4]) + (f", ... ({len(taking)} algorithms)" if len(taking) > 4 else "")
            raise ScenarioError(f"{where}: [workload] local_iterations = {workload.local_iterations!r}: per-device "
                                f"local iterations are trained by the algorithms that declare them ({some}) and "
                                f"in physics-only runs; {name!r} trains every device the same epochs: expected one "
                                f"integer >= 1")


def check_algorithms(system: SystemConfig, learned: Mapping[str, Any], where: str) -> None:
    """Each algorithm of ``[run] algorithms`` is registered and its options fit the scenario.

    Its spec's ``check(cfg, facts)`` (:mod:`edgesim.learning.algorithms`) sees
    the devices, the partition and the model; torch-free, so ``edgesim plan``
    and ``edgesim run`` refuse the same things, before any data is loaded.
    """
    from edgesim.learning.algorithms import ALGORITHMS, ScenarioFacts
    from edgesim.learning.config import algorithm_of
    from edgesim.learning.model_specs import MODELS

    run, data, train = learned["run"], learned["data"], learned["train"]
    facts = ScenarioFacts(system.n_devices, run.clients_per_round, data, train,
                          getattr(MODELS.get(train.model), "weight_layers", None))
    for name in run.algorithms:
        base = algorithm_of(learned, name)
        if base not in ALGORITHMS:
            raise ScenarioError(f"{where}: [run] algorithms: unknown algorithm {name!r}; expected one of: "
                                f"{', '.join(sorted(ALGORITHMS))}")
        spec = ALGORITHMS[base]
        cfg = learned["algorithms"].get(name) or spec.config_cls()
        table = f"[algorithms.{name}]" if name in learned["algorithms"] else f"{name} (defaults; [algorithms.{name}])"
        if base != name:
            table = f"[variants.{name}]"
        try:
            check_option_scales(cfg)
            if spec.check is not None:
                spec.check(cfg, facts)
        except ConfigError as e:  # its parts kept (key, value, expected)
            raise e.at(f"{where}: {table}") from None
        except ValueError as e:
            raise ScenarioError(f"{where}: {table}: {e}") from None
        check_compression(name, spec.config_cls, learned["compression"], learned["codecs"][name], where)


def check_option_scales(cfg) -> None:
    """Every number of an algorithm's options within :func:`edgesim.config.option_bound` of its default (one rule
    for all algorithms and plugins); ``ValueError`` naming the first that is not, with the option's meaning (its
    config class's docstring, as ``edgesim list`` shows it)."""
    from edgesim.config import check_option_scale, field_meaning

    for f in dataclasses.fields(cfg):
        default = f.default if f.default is not dataclasses.MISSING else None
        value = getattr(cfg, f.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            check_option_scale(f.name, value, default, field_meaning(type(cfg), f.name))


def check_compression(name: str, config_cls: type, settings: Mapping[str, Any], cfg, where: str) -> None:
    """Algorithm ``name`` takes the compression it would run with, or the scenario is refused in one line.

    An algorithm's config class declares ``COMPRESSION`` (what its transfers
    carry, docs/model/compression.md) when it applies compression; without it, a
    compressed direction is refused with its ``COMPRESSION_REFUSED`` reason.
    """
    if cfg.is_none or getattr(config_cls, "COMPRESSION", None):
        return
    table = f"[algorithms.{name}.compression]" if name in settings else "[compression]"
    direction = next(d for d in ("uplink", "downlink", "backhaul") if not getattr(cfg, d).is_none)
    reason = getattr(config_cls, "COMPRESSION_REFUSED", None) or (
        "its transfers are not one model or update per device that this compression applies to")
    raise ScenarioError(f"{where}: {table} {direction} = {getattr(cfg, direction).label()!r}: algorithm {name!r} "
                        f"cannot take it ({reason}); expected \"none\" for it (set compression per algorithm under "
                        f"[algorithms.NAME.compression])")


def check_warm_start(system: SystemConfig, budget: BudgetConfig, learned: Mapping[str, Any], where: str) -> None:
    """``[run] warm_start``: shorter than the run (``rounds``, else the budget's G), and its algorithm's options
    (its ``[algorithms.NAME]`` table, if any) fit the scenario as they would if it were run."""
    run = learned["run"]
    ws = run.warm_start
    if ws is None:
        return
    if run.rounds is None and ws["rounds"] >= budget.rounds:
        raise ScenarioError(f"{where}: [run] warm_start.rounds = {ws['rounds']!r}: expected fewer than the run's "
                            f"rounds ([budget] rounds = {budget.rounds}; [run] rounds unset), which count the warm "
                            f"start's rounds too")
    check_algorithms(system, {**learned, "run": dataclasses.replace(run, algorithms=[ws["algorithm"]])}, where)


def resolve_paths(raw: dict, path: Path) -> dict:
    """A relative ``data.data_dir`` (or ``availability.trace``) in a scenario file is relative to the file's own folder.

    (A ``--set data.data_dir=…`` or ``--data-dir`` on the command line is
    relative to the current directory, as any command-line path.)
    """
    avail = raw.get("availability")
    if isinstance(avail, dict) and isinstance(avail.get("trace"), str) and not Path(avail["trace"]).is_absolute():
        raw = {**raw, "availability": {**avail, "trace": str((path.resolve().parent / avail["trace"]).resolve())}}
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("data_dir"), str) and not Path(data["data_dir"]).is_absolute():
        raw = {**raw, "data": {**data, "data_dir": str((path.resolve().parent / data["data_dir"]).resolve())}}
    return raw


def load_scenario(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    *,
    learning: bool = True,
    options: list[str] | None = None,
) -> Scenario:
    """Read, override and validate a scenario file (default: the bundled ``default.toml``).

    ``learning=False`` validates only the simulator sections (what ``edgesim plan`` needs).
    ``options`` names the option of each override (default ``set``, marked for the front ends): an
    error caused by an override names that option first, then the file.
    """
    path = Path(path) if path is not None else DEFAULT_SCENARIO
    overrides = list(overrides or [])
    options = list(options or ["set"] * len(overrides))
    file_raw = resolve_paths(read_toml(path), path)
    raw = apply_overrides(file_raw, overrides, options)
    if learning:
        raw = data_dir_from_env(raw)
    try:
        return validate(raw, str(path), learning=learning)
    except ScenarioError as e:
        culprit = _culprit(file_raw, overrides, options, str(path), learning, str(e))
        if culprit is None:
            raise
        raise ScenarioError(f"{culprit}: {e}") from None


def _culprit(file_raw: dict, overrides: list[str], options: list[str], where: str, learning: bool, message: str):
    """The override (``"⟨set=⟩KEY=VALUE"``) to blame for ``message``: of those without which it is not raised, the
    last whose KEY the message names (``[algorithms.pfedme]: beta =`` for ``algorithms.pfedme.beta``; ``run.algorithms``
    that brought pFedMe in is needed too, but is not what to change), else the last; ``None`` when none is needed."""
    needed = []
    for i in reversed(range(len(overrides))):
        rest = overrides[:i] + overrides[i + 1:]
        try:
            validate(apply_overrides(file_raw, rest, options[:i] + options[i + 1:]), where, learning=learning)
        except ScenarioError as e:
            if str(e) == message:
                continue
        needed.append(i)
        if _names_key(message, overrides[i]):
            return f"⟨{options[i]}=⟩{overrides[i]}"
    return f"⟨{options[needed[0]]}=⟩{overrides[needed[0]]}" if needed else None


def _names_key(message: str, override: str) -> bool:
    """Whether ``message`` names the key of ``override`` (``KEY=VALUE``) as a table and a key: ``[a.b]: c =``."""
    *table, key = override.split("=", 1)[0].strip().split(".")
    return bool(table) and f"[{'.'.join(table)}]" in message and f" {key} = " in f" {message}"
