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

DESCRIBED_TABLES = ("system", "budget", "train", "run")


def _samples(rule):
    """(values the rule documents as allowed, values it documents as refused), from its own parameters."""
    from edgesim.config import Choice, Described, Flag, Integer, Plausible
    from edgesim.config import Finite as Number

    inside, outside = [], ["text"] if not isinstance(rule, (Choice, Described)) else []
    if isinstance(rule, Plausible):
        eps = max(abs(rule.low), abs(rule.high)) * 1e-9 or 1e-30
        inside += [rule.high] + ([] if rule.above_low else [rule.low])
        outside += [rule.low - eps, rule.high + eps, float("nan")] + ([rule.low] if rule.above_low else [])
    elif isinstance(rule, Number):
        if rule.minimum is not None:
            inside += [rule.minimum + 0.5 * (1 if rule.below is None else rule.below - rule.minimum)]
            outside += [rule.minimum - 1] + ([rule.minimum] if rule.strict else [])
            inside += [] if rule.strict else [rule.minimum]
        if rule.below is not None:
            outside.append(rule.below)
    elif isinstance(rule, Integer):
        inside += [rule.minimum] + ([rule.maximum] if rule.maximum is not None else [rule.minimum + 3])
        outside += [rule.minimum - 1, True, float(rule.minimum) + 0.5]
        outside += [rule.maximum + 1] if rule.maximum is not None else []
        inside += ["auto"] if rule.auto else []
    elif isinstance(rule, Choice):
        inside += list(rule.names())
        outside += ["no such choice"]
    elif isinstance(rule, Flag):
        inside += [True, False]
        outside += [1, "yes"]
    if rule.optional:
        inside.append(None)
    return inside, outside


def test_every_key_of_the_described_tables_documents_the_range_its_check_enforces():
    """[system], [budget], [train], [run]: every key is described in its field's metadata (no hand entry), the
    reference prints that rule's text, and the class accepts every value the text allows and refuses every value it
    does not — each refusal naming the key (a value another key's rule spans is refused naming that key instead)."""
    from edgesim.config import ConfigError, Described, described_keys
    from edgesim.scenarios.reference import scenario_tables

    tables = scenario_tables()
    page = (REPO / "docs" / "use" / "scenario_reference.md").read_text()
    cross = {"min_distance_m", "cell_radius_m", "path_loss_intercept_db", "path_loss_slope_db", "nesterov",
             "momentum"}  # checked together with another key in __post_init__ (a distance, a path gain, Nesterov)
    checked = 0
    for table in DESCRIBED_TABLES:
        cls = tables[table]
        docs = described_keys(cls)
        assert set(docs) == {f.name for f in dataclasses.fields(cls)}, (table, "a key without its metadata")
        for name, doc in docs.items():
            assert KEY_DOCS[f"{table}.{name}"] == (doc.doc, doc.unit, doc.allowed.text())
            assert f"| `{name}` | {doc.doc.replace('|', chr(92) + '|')} |" in page
            if isinstance(doc.allowed, Described):  # a registered name, a list of them: its own test file
                continue
            inside, outside = _samples(doc.allowed)
            for value in inside:
                assert doc.allowed.accepts(value, cls()), (table, name, value)
                try:
                    cls(**{name: value})
                except ConfigError as e:
                    assert name in cross or e.key != name, (table, name, value, str(e))
            for value in outside:
                assert not doc.allowed.accepts(value, cls()), (table, name, value)
                with pytest.raises(ConfigError) as refused:
                    cls(**{name: value})
                assert refused.value.key == name or name in cross, (table, name, value, str(refused.value))
                checked += 1
    assert checked > 100
