"""Access schemes as a registry (issue 48.1): the classic schemes are entries, options are validated by each scheme's
own dataclass, a clash is refused naming both classes, and the engine names none of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import simpy

from edgesim.access import SCHEMES, AccessScheme, Cell, build_options, make_link, register_access, scheme_class
from edgesim.access.classic import Fdma, FdmaBanded, Tdma
from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import ACCESS_NAMES, BudgetConfig, ConfigError, SystemConfig, check_number
from edgesim.engine import Simulation
from edgesim.links import FdmaUplink, TdmaUplink
from edgesim.radio import shannon_rate_bps
from edgesim.scenarios.catalog import catalog

ENGINE = Path(__file__).resolve().parents[1] / "edgesim" / "engine.py"
ASYNC = Path(__file__).resolve().parents[1] / "edgesim" / "asynchrony.py"


def test_the_classic_schemes_are_entries():
    assert {"tdma", "fdma", "fdma_banded"} <= set(SCHEMES)
    assert SCHEMES["tdma"] is Tdma and issubclass(Tdma, TdmaUplink)
    assert SCHEMES["fdma"] is Fdma and issubclass(Fdma, FdmaUplink)
    assert SCHEMES["fdma"].banded == "fdma_banded" and SCHEMES["tdma"].banded is None
    assert SCHEMES["tdma"].policy_access == "tdma" and SCHEMES["fdma_banded"].policy_access == "fdma"
    names = {e.name for e in catalog("access")}
    assert {"tdma", "fdma", "fdma_banded"} <= names


def test_the_engine_names_no_scheme():
    for path in (ENGINE, ASYNC):
        text = path.read_text()
        for name in ('"tdma"', '"fdma"', "BandedFdmaUplink", "TdmaUplink(", "FdmaUplink("):
            assert name not in text, (path.name, name)


def test_unknown_scheme_is_one_line():
    with pytest.raises(ConfigError, match=r"^access = 'cdma': expected one of 'tdma', 'fdma', .*`edgesim list "
                                          r"access`[^\n]*$"):
        SystemConfig(access="cdma")


@dataclass(frozen=True)
class _Opts:
    slots: int = 2

    def __post_init__(self):
        check_number("slots", self.slots, minimum=1)


class _Mine(AccessScheme):
    """A test scheme."""

    Options = _Opts

    def transmit(self, env, device, bits, channel_gain, tx_power_w, on_air=None, *, checked=False):
        yield env.timeout(0)


def test_a_registration_of_a_taken_name_is_refused_naming_both():
    with pytest.raises(ConfigError) as e:
        register_access("tdma")(_Mine)
    assert str(e.value) == (f"access scheme 'tdma' is registered twice: by edgesim.access.classic.Tdma and again by "
                            f"{__name__}._Mine; expected a name not taken (rename the plugin's access scheme)")
    assert SCHEMES["tdma"] is Tdma


def test_options_are_the_schemes_own_dataclass():
    register_access("test_mine")(_Mine)
    try:
        assert build_options("test_mine", {"slots": 3}) == _Opts(3)
        assert build_options("test_mine", None) == _Opts()
        with pytest.raises(ConfigError, match=r"^s.toml: \[access\]: slots = 0: expected a number >= 1$"):
            build_options("test_mine", {"slots": 0}, "s.toml: [access]")
        with pytest.raises(ConfigError, match=r"^\[access\]: slots = 3 is an option of access = 'test_mine', not of "
                                              r"access = 'fdma'; expected no options \(it has none\)$"):
            build_options("fdma", {"slots": 3})
        with pytest.raises(ConfigError, match=r"unknown key 'slot' \(= 3\) for access = 'test_mine'; expected one of "
                                              r"slots$"):
            build_options("test_mine", {"slot": 3})
        with pytest.raises(ConfigError, match="registered twice"):
            register_access("test_mine")(type("_Other", (_Mine,), {}))
    finally:  # the registry and the names the checks and the key reference read: as before the test
        del SCHEMES["test_mine"]
        ACCESS_NAMES.remove("test_mine")


def test_a_scheme_without_transmit_or_with_mutable_options_is_refused():
    with pytest.raises(ConfigError, match="expected a class with a method transmit"):
        register_access("test_bad")(type("_Bad", (), {}))
    with pytest.raises(ConfigError, match="expected a frozen dataclass of its options"):
        register_access("test_bad")(type("_Bad", (_Mine,), {"Options": dict}))
    assert "test_bad" not in SCHEMES


def test_make_link_gives_the_registered_class():
    env = simpy.Environment()
    cell = Cell(1e6, 1e-20, 4, 0)
    assert type(make_link(env, "tdma", cell)) is Tdma
    assert type(make_link(env, "fdma", cell)) is Fdma
    assert scheme_class("fdma_banded") is FdmaBanded


class _Plan:
    def __init__(self, bits):
        self.bits = bits

    def plan_round(self, view):
        return RoundPlan(tuple(DeviceWork(d, {"train": 0.0}, b, 0.0) for d, b in enumerate(self.bits)))

    def complete_round(self, outcome):
        return {}


def test_fdma_banded_gives_each_uploader_b_over_k_for_the_round_by_hand():
    g_db, b = -100.0, 1e6
    system = SystemConfig(n_devices=3, access="fdma_banded", channel_gain_db=g_db, bandwidth_hz=b, tx_power_dbm=20)
    rec = Simulation(system, BudgetConfig(rounds=1), _Plan([1e6, 2e6, 0.0]), seed=0).run_round()
    g, p, n0 = 10 ** (g_db / 10), 0.1, system.noise_psd_w_per_hz
    rate = shannon_rate_bps(b / 2, g, p, n0)  # two uploaders: B/2 each, not handed on when the first ends
    rows = {r.device: r for r in rec.devices}
    assert rows[0].upload_airtime_s == pytest.approx(1e6 / rate, rel=1e-12)
    assert rows[1].upload_airtime_s == pytest.approx(2e6 / rate, rel=1e-12)
    assert rows[0].bandwidth_hz == rows[1].bandwidth_hz == b / 2 and rows[2].bandwidth_hz == 0.0
    assert rec.duration_s == pytest.approx(2e6 / rate, rel=1e-12)


def test_fdma_banded_has_no_asynchronous_mode():
    from edgesim.asynchrony import check_async_access

    with pytest.raises(ValueError, match=r"^access = 'fdma_banded' has no asynchronous mode \(\[budget\] round_mode "
                                         r"= 'fedbuff'\): its equal band B/K needs the round's K uploaders"):
        check_async_access("fdma_banded", "fedbuff")
    check_async_access("fdma", "fedbuff")  # processor sharing takes a transfer at any instant
