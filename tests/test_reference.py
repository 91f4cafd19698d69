"""The scenario reference (scenarios/reference.py → docs/scenario_reference.md): every key described, the page
current, every key of the shipped scenarios in it, and `edgesim list` showing the meanings."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

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
    page = (REPO / "docs" / "scenario_reference.md").read_text()
    assert page == reference_markdown(), (
        "docs/scenario_reference.md is stale: python -m edgesim.scenarios.reference > docs/scenario_reference.md")
    assert "| `bandwidth_hz` | uplink bandwidth B shared by the devices (Eq. 8) | Hz | number | `1000000.0` | > 0 |" in page


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
