"""Issue 40: an algorithm option of an absurd magnitude (pFedMe's ``beta = 1e300``, which diverged later and was
blamed on the learning rate) is one line before anything runs, by one rule for every algorithm's options
(:func:`edgesim.config.check_option_scale`: at most 1e6 times the default's magnitude), with the option's meaning."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import TINY_SCENARIO
from test_safety import one_error_line, run

from edgesim.config import OPTION_SCALE_MAX, ConfigError, check_option_scale, option_bound
from edgesim.learning.algorithms import ALGORITHMS
from edgesim.scenarios.schema import check_option_scales, load_scenario


def test_the_bound_by_hand():
    assert option_bound(1.0) == 1e6 and option_bound(15.0) == 1.5e7 and option_bound(-0.5) == 1e6
    assert option_bound(None) == option_bound(0) == option_bound("x") == option_bound(True) == OPTION_SCALE_MAX
    check_option_scale("beta", 1e6, 1.0)  # the bound itself is plausible
    check_option_scale("beta", -1e6, 1.0)
    check_option_scale("name", "text", 1.0)  # not a number: another check's business
    with pytest.raises(ValueError, match=r"beta = 1000001.0: expected a plausible value, \|beta\| <= 1e\+06"):
        check_option_scale("beta", 1.000001e6, 1.0)
    with pytest.raises(ValueError, match=r"\|n\| <= 1e\+15 .*the default being 1000000000"):
        check_option_scale("n", 10**16, 10**9)  # a plugin's large default scales its bound


def numeric_options():
    for name, spec in sorted(ALGORITHMS.items()):
        cfg = spec.config_cls()
        for f in dataclasses.fields(cfg):
            value = getattr(cfg, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) or (value is None and f.name == "lr"):
                yield name, f.name, value


def test_every_default_is_plausible_and_every_option_has_the_rule():
    options = list(numeric_options())
    assert len(options) > 100  # the rule sees every algorithm's numbers, not one special case
    for spec in ALGORITHMS.values():
        check_option_scales(spec.config_cls())
    for _, key, default in options:
        far = option_bound(default) * 10
        with pytest.raises(ValueError, match=rf"^{key} = .*: expected a plausible value, \|{key}\| <= "):
            check_option_scale(key, int(far) if isinstance(default, int) else far, default)


@pytest.mark.parametrize("key, value", [("beta", "1e300"), ("lam", "1e300"), ("personal_lr", "1e30"), ("lr", "1e9")])
def test_pfedme_absurd_option_is_one_line_naming_key_range_and_meaning(tmp_path, key, value):
    (tmp_path / "t.toml").write_text(TINY_SCENARIO)
    result = run("run", tmp_path / "t.toml", "--set", f"algorithms.pfedme.{key}={value}",
                 "--set", "run.algorithms=['pfedme']", "--out", tmp_path / "R")
    line = one_error_line(result)
    assert line.startswith(f"error: --set algorithms.pfedme.{key}={value}: ")  # not the run.algorithms override
    assert f"[algorithms.pfedme]: {key} = " in line and f"|{key}| <= " in line and "train.lr" not in line
    assert line.split("default")[-1].split("; ", 1)[1].startswith(f"{key}: ")  # the option's meaning follows the range
    assert not list(tmp_path.glob("R*"))


def test_plan_refuses_it_too(tmp_path):
    (tmp_path / "t.toml").write_text(TINY_SCENARIO + "\n[algorithms.fedprox]\nmu = 1e300\n")
    with pytest.raises(ConfigError, match=r"\[algorithms.fedprox\]: mu = 1e\+300: expected a plausible value"):
        load_scenario(tmp_path / "t.toml", ["run.algorithms=['fedprox']"], learning=True)
