"""The scenario reference (scenarios/reference.py → docs/use/scenario_reference.md): every key described, the page
current, every key of the shipped scenarios in it, and `edgesim list` showing the meanings."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from edgesim.scenarios.catalog import catalog, dataclass_options
from edgesim.scenarios.reference import KEY_DOCS, field_meaning, reference_markdown, scenario_keys

REPO = Path(__file__).resolve().parents[1]


def test_every_scenario_key_has_a_meaning_unit_and_range_and_every_entry_a_key():
    keys = scenario_keys()
    missing = sorted(k for k in keys if not KEY_DOCS.get(k, ("",))[0].strip())
    assert not missing, f"scenario keys without a description in edgesim/scenarios/reference.py: {missing}"
    assert not [k for k, (_, _, allowed) in KEY_DOCS.items() if not allowed.strip()], "an entry without its range"
    stale = sorted(set(KEY_DOCS) - set(keys))
    assert not stale, f"described keys that no scenario table has: {stale}"


def test_the_reference_page_is_generated_from_the_code():
    page = (REPO / "docs" / "use" / "scenario_reference.md").read_text()
    assert page == reference_markdown(), (
        "docs/use/scenario_reference.md is stale: python -m edgesim.scenarios.reference > docs/use/scenario_reference.md")
    assert "| `bandwidth_hz` | uplink bandwidth B shared by the devices (Eq. 8) | Hz | number | `1000000.0` | " \
           "[1, 1e+12] |" in page  # the range its check enforces (was "> 0", a hand copy that disagreed with it)


def _dotted(table: dict, prefix: str = ""):
    for key, value in table.items():
        if isinstance(value, dict) and not (prefix == "run." and key == "warm_start"):
            yield from _dotted(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def test_every_key_of_the_shipped_scenarios_is_in_the_reference():
    keys = set(scenario_keys())
    for path in sorted((REPO / "scenarios").glob("*.toml")):
        used = {k for k in _dotted(tomllib.loads(path.read_text())) if not k.startswith("algorithms.")}
        assert used <= keys, (path.name, sorted(used - keys))


def test_edgesim_list_gives_each_data_key_its_meaning():
    for entry in catalog("partitions"):
        for option in entry.options:
            assert option.meaning == KEY_DOCS[f"data.{option.name}"][0], (entry.name, option.name)
    npz = next(e for e in catalog("datasets") if e.name == "npz")
    assert npz.options[0].meaning.startswith("the .npz archive")
    fedprox = next(e for e in catalog("algorithms") if e.name == "fedprox")
    assert next(o for o in fedprox.options if o.name == "weighting").meaning.startswith("weighting: \"samples\"")


def test_every_option_that_edgesim_list_shows_has_a_one_line_meaning():
    """Every option of every registered algorithm, partition, resource policy, data set and model, read from the registries, so an
    option or an algorithm added later is held to it too; a resource policy's option means what the reference says."""
    missing = [f"{kind} {e.name}: {o.name}" for kind in ("algorithms", "partitions", "policies", "datasets", "models")
               for e in catalog(kind) for o in e.options if not o.meaning.strip()]
    assert not missing, ("options without a meaning: write a line ``name``: meaning. in the docstring of their "
                         f"config class (learning/algorithms/NAME/config.py): {missing}")
    for entry in catalog("policies"):
        for option in entry.options:
            assert option.meaning == KEY_DOCS[f"resources.{option.name}"][0], (entry.name, option.name)


@dataclasses.dataclass(frozen=True)
class _Cfg:
    """Options, one a line.

    ``rate_hz``: how often, in Hz (Eq. 3).
    ``alpha``: α of the mix; ``beta`` is its partner.
    ``beta``: β, the other weight.
    """

    rate_hz: float = 1.0
    alpha: float = 0.5
    beta: float = 0.5
    gamma: float = 0.0


def test_an_options_meaning_is_the_first_sentence_of_its_class_docstring_that_names_it():
    assert field_meaning(_Cfg, "rate_hz") == "rate_hz: how often, in Hz (Eq. 3)."
    assert field_meaning(_Cfg, "alpha") == "alpha: α of the mix"
    assert field_meaning(_Cfg, "beta") == "beta is its partner."  # the first sentence that names it wins
    assert field_meaning(_Cfg, "gamma") == ""  # undocumented: the test above would name it
    assert [o.meaning for o in dataclass_options(_Cfg)][-1] == ""
    variant = dataclasses.dataclass(frozen=True)(type("_Variant", (_Cfg,), {"__doc__": "A variant: ``gamma``: 1."}))
    assert field_meaning(variant, "gamma") == "A variant: gamma: 1."  # its own docstring first, then its bases'
    assert field_meaning(variant, "rate_hz") == "rate_hz: how often, in Hz (Eq. 3)."


def test_list_scenarios_gives_each_shipped_one_its_description_scale_and_host_time():
    entries = {e.name: e for e in catalog("scenarios")}
    assert len(entries) == len(list((REPO / "scenarios").glob("*.toml")))
    default = entries["default.toml"]
    assert default.summary.startswith("Digits (8x8), 20 devices")
    assert default.detail == "digits, 20 devices, 50 rounds, 3 algorithm(s); host time: under 2 minutes on a 2-core CPU"
    assert all("host time: " in e.detail for e in entries.values())


# --- ranges from one source: the rule that checks a key writes its range (edgesim.config.key) -------------------

DESCRIBED_TABLES = ("", "system", "access", "budget", "workload", "data", "train", "run", "parametric", "async", "availability",
                    "compression.uplink", "compression.downlink", "resources")  # every table ("": the top level)
# The other keys a key's documented range depends on (its rule's `also`), set so that the range itself is sampled.
CONTEXT = {("data", "data_dir"): {"dataset": "mnist"}, ("data", "file"): {"dataset": "npz"},
           ("data", "image_size"): {"dataset": "image_folder"}, ("data", "test_fraction"): {"dataset": "image_folder"},
           ("data", "server_validation"): {"partition": "labels_at_server"},
           ("data", "validation_size"): {"train_pool_size": 100}, ("parametric", "a0"): {"a_max": 1.0},
           ("access", "coherence_rbs"): {"resource_blocks": 100_000},
           ("system", "csi_error_std"): lambda value: {} if value is None else {"csi": "estimated"},
           ("system", "csi_correlation"): {"rayleigh_fading": True},
           ("system", "frequency_reuse"): {"cells": [{"x_m": 0, "y_m": 0}, {"x_m": 500, "y_m": 0},
                                                     {"x_m": 0, "y_m": 500}]}}


def _context(table: str, name: str, value) -> dict:
    """The other keys set while ``name = value`` is built (a function of the value where unset needs none)."""
    context = CONTEXT.get((table, name), {})
    return context(value) if callable(context) else context


def _samples(rule, cfg=None):
    """(values the rule documents as allowed — each bound among them —, values just outside them), from its own
    parameters (``cfg``: the config a bound set by another key is read from, n_devices, the number of cells)."""
    from edgesim.config import AnyOf, Choice, Described, Flag, Integer, Items, Plausible, Spread, Text
    from edgesim.config import Finite as Number

    inside, outside = [], ["text"] if not isinstance(rule, (AnyOf, Choice, Described, Text)) else []
    if isinstance(rule, Plausible):
        eps = max(abs(rule.low), abs(rule.high)) * 1e-9 or 1e-30
        inside += [rule.high] + ([] if rule.above_low else [rule.low])
        outside += [rule.low - eps, rule.high + eps, float("nan")] + ([rule.low] if rule.above_low else [])
    elif isinstance(rule, Number):
        if rule.minimum is not None:
            top = rule.below if rule.below is not None else rule.maximum
            inside += [rule.minimum + 0.5 * (1 if top is None else top - rule.minimum)]
            outside += [rule.minimum - 1, rule.minimum - 1e-9] + ([rule.minimum] if rule.strict else [])
            inside += [] if rule.strict else [rule.minimum]
        if rule.below is not None:
            outside.append(rule.below)
        if rule.maximum is not None:
            inside.append(rule.maximum)
            outside += [rule.maximum + 1e-9 * max(1.0, abs(rule.maximum)), float("inf")]
        inside += ["auto"] if rule.auto else []
        if rule.per_device:  # a list of one per device; one too many or too few
            n = cfg.n_devices
            inside.append([inside[0]] * n)
            outside += [[inside[0]] * (n + 1), [inside[0]] * (n - 1), [inside[0]] * (n - 1) + [outside[1]]]
    elif isinstance(rule, Integer):
        top = rule.maximum(cfg) if callable(rule.maximum) else rule.maximum  # a bound another key sets: its value
        inside += [rule.minimum] + ([top] if top is not None else [rule.minimum + 3])
        outside += [rule.minimum - 1, True, float(rule.minimum) + 0.5]
        outside += [top + 1] if top is not None else []
        inside += ["auto"] if rule.auto else []
    elif isinstance(rule, AnyOf):  # what any of its rules allows; what each refuses that none allows
        for part in rule.rules:
            part_in, part_out = _samples(part, cfg)
            inside += part_in
            outside += [v for v in part_out if not rule.accepts(v, cfg)]
    elif isinstance(rule, Choice):
        inside += list(rule.names())
        outside += ["no such choice"]
    elif isinstance(rule, Flag):
        inside += [True, False]
        outside += [1, "yes"]
    elif isinstance(rule, Text):
        inside += ["x"] + ([] if rule.nonempty else [""])
        outside += [1] + ([""] if rule.nonempty else [])
    elif isinstance(rule, Items):
        item_in, item_out = _samples(rule.item, cfg)
        n = rule.length or 2  # a list of any length: two items
        inside += [[v] * n for v in item_in if v is not None]
        outside += [[item_out[1]] + item_in[:1] * (n - 1)] + ([] if rule.length is None else [item_in[:1] * (n + 1)])
    elif isinstance(rule, Spread):
        item_in, item_out = _samples(rule.item, cfg)
        numbers = [v for v in item_in if v not in ("auto", None)]
        inside += numbers + [numbers, {"dist": "uniform", "low": min(numbers), "high": max(numbers)}]
        inside += ["auto"] if rule.auto else []
        outside += [v for v in item_out if v != "text"] + [[], [item_out[1]],
                                                           {"dist": "normal", "low": numbers[0], "high": numbers[0]},
                                                           {"dist": "uniform", "low": max(numbers), "high": -1}]
    if rule.optional:
        inside.append(None)
    return inside, outside


def _build(table: str, name: str, value, context: dict):
    """The table ``table`` built with ``name = value`` (a compression direction: a :class:`Codec` of a method that
    reads the option, its other options at a value their rules allow; ``[access]``: the options of a scheme that
    reads it)."""
    from edgesim.access import SCHEMES
    from edgesim.compression import CODECS, Codec, lossy_methods, readers
    from edgesim.config import key_doc
    from edgesim.scenarios.reference import ACCESS, CODEC, access_options, scenario_tables

    cls = scenario_tables()[table]
    if cls == ACCESS:
        return SCHEMES[access_options()[name][1][0]].Options(**context, **{name: value})
    if cls != CODEC:
        return cls(**context, **{name: value})

    def required(method):  # the options without a default, at the first value their rules allow
        return {f.name: _samples(key_doc(f).allowed)[0][0] for f in dataclasses.fields(CODECS[method])
                if f.default is None}

    if name == "method":
        return Codec(value, **(required(value) if value in CODECS else {}))
    method = lossy_methods()[0] if name == "error_feedback" else readers(name)[0]
    return Codec(method, **{**required(method), name: value})


def test_every_key_of_every_table_documents_the_range_its_check_enforces():
    """Every table — the top level, [system] … [resources], the registered access schemes' [access] options, each
    compression direction and the registered codecs' options: every key is described in its field's metadata (no hand entry), the reference prints that rule's text,
    and the class accepts every value the text allows, each bound included, and refuses every value just outside it
    in one line naming the key, the value and what was expected (a value another key's rule spans is refused naming
    that key instead)."""
    from edgesim.config import ConfigError, Described, key_doc
    from edgesim.scenarios.reference import scenario_tables, table_fields

    page = (REPO / "docs" / "use" / "scenario_reference.md").read_text()
    cross = {"min_distance_m", "cell_radius_m", "path_loss_intercept_db", "path_loss_slope_db", "nesterov",
             "momentum"}  # checked together with another key in __post_init__ (a distance, a path gain, Nesterov)
    checked, tables, described = 0, set(), set()
    for table in scenario_tables():  # every table the reference lists, one added later too
        docs = {name: key_doc(f) for name, f in table_fields(table).items()}
        assert None not in docs.values(), (table, "a key without its metadata", docs)
        for name, doc in docs.items():
            dotted = f"{table}.{name}" if table else name
            assert KEY_DOCS[dotted][:2] == (doc.doc, doc.unit) and KEY_DOCS[dotted][2].startswith(doc.allowed.text())
            assert f"| `{name}` | {doc.doc.replace('|', chr(92) + '|')} |" in page
            if isinstance(doc.allowed, Described):  # words only: its boundary cases are DESCRIBED_ONLY's, below
                described.add(dotted)
                continue
            cls = scenario_tables()[table]
            cfg = cls(**_context(table, name, None)) if isinstance(cls, type) else None  # what a rule may read
            inside, outside = _samples(doc.allowed, cfg)
            for value in inside:
                assert doc.allowed.accepts(value, cfg), (table, name, value)
                try:
                    _build(table, name, value, _context(table, name, value))
                except ConfigError as e:
                    assert name in cross or e.key != name, (table, name, value, str(e))
            for value in outside:
                assert not doc.allowed.accepts(value, cfg), (table, name, value)
                with pytest.raises(ConfigError) as refused:
                    _build(table, name, value, _context(table, name, value))
                e = refused.value
                assert e.key.split("[")[0].split(".")[0] == name or name in cross, (table, name, value, str(e))
                assert "\n" not in str(e) and e.expected and f"{e.key} = " in str(e), (table, name, value, str(e))
                checked += 1
            tables.add(table)
    assert tables == set(DESCRIBED_TABLES) | set(scenario_tables())
    assert checked > 300, checked
    assert described == set(DESCRIBED_ONLY), ("a key described in words only must have its boundary cases in "
                                              "DESCRIBED_ONLY (or a rule)", sorted(described ^ set(DESCRIBED_ONLY)))


def test_no_key_is_written_by_hand_in_the_reference_module():
    """scenarios/reference.py derives every entry: each documented key is a field of its table whose metadata
    gives its line, and the module spells no key's meaning (no ``"table.key": (...)`` entry)."""
    import ast

    from edgesim.scenarios import reference

    derived = reference.described_docs()
    assert KEY_DOCS == derived and set(KEY_DOCS) == set(scenario_keys())
    tree = ast.parse(Path(reference.__file__).read_text())
    dotted = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in KEY_DOCS
              and "." in n.value]  # "workload.model_bits": a key written out
    entries = [k.value for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys
               if isinstance(k, ast.Constant) and k.value in KEY_DOCS]  # {"seed": (...)}: a hand entry
    spelled = dotted + entries
    assert not spelled, f"keys spelled by hand in scenarios/reference.py: {spelled}"


# --- the keys described in words only: their check spans other keys or a registry read later ---------------------
# Each: why no rule can be its check, the words the reference prints, values the check accepts and values it refuses
# in one line naming the key (a scenario table, built with the scenario's own loader). The boundary test above asserts
# that these are exactly the keys it skips, so a key added in words only fails it until its cases are written here.

_CELL = {"x_m": 0, "y_m": 0}
_FAR = {"x_m": 1000, "y_m": 0}
_MANY = [{"x_m": 10.0 * i, "y_m": 0} for i in range(1000)]
_WARM = {"algorithm": "fedavg_labeled", "rounds": 2}
_POLICY = "each name is checked once the installed policy plugins are loaded, against the access scheme and the " \
          "other policies (edgesim.resources.check_config): a ResourcesConfig may name a policy registered later"
DESCRIBED_ONLY = {
    "system.cells": ("tables checked against each other (no two at one point), each its own keys' ranges",
                     "a list of 1 to 1000 tables, no two at one point, or unset",
                     [None, [_CELL], [_CELL, _FAR], _MANY],
                     [[], _MANY + [{"x_m": -10, "y_m": 0}], [_CELL, dict(_CELL)], [{"x_m": 0}], 5,
                      [{**_CELL, "z_m": 1}], [{**_CELL, "cpu_hz": 0}]]),
    "run.algorithms": ("names of the algorithm registry, which [run] plugins fill after [run] is read; a physics-only "
                       "run's is its own", "registered names, each once",
                       [["fedavg"], ["fedavg", "fedprox"]],
                       [[], ["fedavg", "fedavg"], "fedavg", [1], ["no_such_algorithm"]]),
    "run.warm_start": ("a table whose algorithm is a registered supervised one and whose rounds are fewer than the "
                       "run's", "a table with R < rounds, or unset",
                       [None, _WARM, {**_WARM, "rounds": 4}],
                       ["fedavg_labeled", {**_WARM, "rounds": 5}, {**_WARM, "rounds": 0}, {"algorithm": "fedavg_labeled"},
                        {**_WARM, "algorithm": "fixavg"}, {**_WARM, "extra": 1}]),
    **{f"resources.{kind}": (_POLICY, None, None, ["no_such_policy", 3])
       for kind in ("scheduling", "bandwidth", "power", "cpu_freq", "resource_blocks")},
    **{f"hierarchy.{name}": ("one value, or a list whose length is checked against system.cells (another table)",
                             f"{words}; or a list of one per cell", accepted, refused)
       for name, words, accepted, refused in (
           ("backhaul_bps", "> 0, inf allowed", [1e-9, 1e8, float("inf"), [1e8]],
            [0, -1.0, float("nan"), "fast", True, [], [1e8, 1e8], [0]]),
           ("backhaul_latency_s", "finite >= 0", [0, 0.01, [0.0]],
            [-1e-9, float("inf"), float("nan"), "none", [], [0.0, 0.0], [-1]]))},
}


def _scenario(dotted: str, value, access: str = "tdma", **resources) -> dict:
    """A small scenario with ``dotted = value`` (run.rounds = 5 for the warm start's bound; a policy with the access
    scheme and the other policies it needs)."""
    table, name = dotted.split(".")
    raw = {"system": {"n_devices": 4, "access": access, "bandwidth_hz": 5e6}, "run": {"algorithms": ["fedavg"], "clients_per_round": 2,
                                                                 "rounds": 5}, "resources": dict(resources)}
    if table == "hierarchy":
        raw["budget"] = {"round_mode": "hierarchical"}
    raw.setdefault(table, {})[name] = value
    return raw


@pytest.mark.parametrize("dotted", sorted(DESCRIBED_ONLY))
def test_a_key_described_in_words_accepts_and_refuses_what_its_words_say(dotted):
    """The keys no rule checks (DESCRIBED_ONLY says why, for each): the reference prints their words, the scenario
    loader accepts the values the words allow — each bound — and refuses the values just outside in one line naming
    the key. A policy's words name the registry's policies: each is accepted (with the access scheme and the other
    policies it declares it needs), a name outside the registry refused."""
    from edgesim.config import Described, key_doc
    from edgesim.resources import POLICIES
    from edgesim.resources.registry import declared
    from edgesim.scenarios.reference import table_fields
    from edgesim.scenarios.schema import validate

    table, name = dotted.split(".")
    rule = key_doc(table_fields(table)[name]).allowed
    why, words, accepted, refused = DESCRIBED_ONLY[dotted]
    assert isinstance(rule, Described) and why
    if words is None:  # a policy: the registry's names, in the reference's words, each accepted where it applies
        names = list(POLICIES[name])
        assert names and all(f'"{n}"' in rule.text() for n in names), (rule.text(), names)
        for policy in names:
            d = declared(name, policy)
            access = d.access[0] if d.access else "ofdma" if name == "resource_blocks" else "tdma"
            validate(_scenario(dotted, policy, access, **d.needs), "s.toml")
    else:
        assert rule.text() == words and KEY_DOCS[dotted][2] == words
    for value in accepted or ():
        validate(_scenario(dotted, value), "s.toml")
    for value in refused:
        with pytest.raises(ValueError) as e:
            validate(_scenario(dotted, value, "ofdma" if name == "resource_blocks" else "tdma"), "s.toml")
        message = str(e.value)
        assert name in message and "expected" in message and "\n" not in message, (dotted, value, message)
