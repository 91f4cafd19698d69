"""The scenario reference (scenarios/reference.py → docs/scenario_reference.md): every key described, the page
current, every key of the shipped scenarios in it, and `edgesim list` showing the meanings."""

from __future__ import annotations

import tomllib
from pathlib import Path

from edgesim.scenarios.catalog import catalog
from edgesim.scenarios.reference import KEY_DOCS, reference_markdown, scenario_keys

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


def test_list_scenarios_gives_each_shipped_one_its_description_scale_and_host_time():
    entries = {e.name: e for e in catalog("scenarios")}
    assert len(entries) == len(list((REPO / "scenarios").glob("*.toml")))
    default = entries["default.toml"]
    assert default.summary.startswith("Digits (8x8), 20 devices")
    assert default.detail == "digits, 20 devices, 50 rounds, 3 algorithm(s); host time: under 2 minutes on a 2-core CPU"
    assert all("host time: " in e.detail for e in entries.values())
