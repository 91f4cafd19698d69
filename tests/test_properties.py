"""Properties over generated inputs: one Shannon rate, the deadline tolerance, and bad input as ConfigError only.

- Eq. (8) is computed by one function, for scalars and arrays alike;
- a round whose work exactly fills its deadline (as the plan computes it) drops nothing;
- any scenario table, ``--set`` or ``--grid`` string either validates or raises
  :class:`~edgesim.config.ConfigError` — never another exception — and so does
  reading a malformed ``rounds.csv``/``sweep.csv`` for ``edgesim plot``.
"""

from __future__ import annotations

import math
import string

import numpy as np
import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edgesim.budget import feasibility_constants
from edgesim.config import BudgetConfig, ConfigError, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation, deadline_with_tolerance_s
from edgesim.learning.algorithms import ALGORITHMS  # torch-free: the registry and the algorithms' configs
from edgesim.radio import shannon_rate_bps
from edgesim.units import dbm_to_w

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- one Shannon rate ---------------------------------------------------------------------------------------------


def test_shannon_rate_by_hand_scalar_and_array():
    # b = 1 MHz, SNR = g p / (N0 b) = 3 → r = 1e6 · log2(4) = 2 Mbit/s
    assert shannon_rate_bps(1e6, 3e-6, 1.0, 1e-12) == pytest.approx(2e6, rel=1e-15)
    rates = shannon_rate_bps(1e6, np.array([3e-6, 7e-6, 0.0]), 1.0, 1e-12)
    assert rates == pytest.approx([2e6, 3e6, 0.0], rel=1e-15)


def test_shannon_rate_low_snr_limit():
    # b → ∞: r → g p / (N0 ln 2), the power-limited regime (log1p keeps the digits)
    g, p, n0 = 1e-14, 0.2, 4e-21  # SNR = 5e-7 at 1 THz
    assert shannon_rate_bps(1e12, g, p, n0) == pytest.approx(g * p / (n0 * math.log(2)), rel=1e-6)


@SETTINGS
@given(
    b=st.floats(1.0, 1e12), g=st.floats(1e-25, 1e-3), p=st.floats(1e-9, 1e3), n0_dbm=st.floats(-220, -100),
)
def test_shannon_rate_scalar_equals_array_and_grows_with_bandwidth(b, g, p, n0_dbm):
    n0 = dbm_to_w(n0_dbm)
    scalar = shannon_rate_bps(b, g, p, n0)
    array = shannon_rate_bps(np.array([b, 2 * b]), np.array([g, g]), p, n0)
    assert array[0] == pytest.approx(scalar, rel=1e-12)
    assert scalar > 0 and array[1] >= array[0] * (1 - 1e-12)


def test_engine_uses_the_one_shannon_rate(monkeypatch):
    """TDMA, FDMA and the system view all go through ``edgesim.radio``'s Eq. (8).

    The system view and FDMA call the vectorised ``shannon_rate_bps``; each TDMA transfer calls its scalar
    core ``unchecked_shannon_rate_bps`` (the devices' inputs are checked once per round), which
    ``shannon_rate_bps`` itself calls on floats.
    """
    import edgesim.engine as engine
    import edgesim.links as links

    calls, scalar_calls = [], []
    real, real_scalar = engine.shannon_rate_bps, links.unchecked_shannon_rate_bps
    for module in (engine, links):  # the system view (engine) and the links
        monkeypatch.setattr(module, "shannon_rate_bps", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(links, "unchecked_shannon_rate_bps", lambda *a: scalar_calls.append(a) or real_scalar(*a))
    for access in ("tdma", "fdma"):
        system = SystemConfig(n_devices=3, channel_gain_db=-100, access=access)
        Simulation(system, BudgetConfig(rounds=1), ParametricBackend(3, 2, WorkloadConfig(model_bits=1e6, samples_per_device=500))).run()
    views = [a for a in calls if a[0] == 1e6 and isinstance(a[1], np.ndarray)]
    fdma = [a for a in calls if a[0] == 0.5e6]  # two transfers sharing the 1 MHz band
    assert len(views) == 2 and fdma
    assert len(scalar_calls) == 2 and all(a[0] == 1e6 for a in scalar_calls)  # the two TDMA uploads, whole band


# --- the deadline tolerance ----------------------------------------------------------------------------------------


@SETTINGS
@given(
    k=st.integers(1, 6),
    model_bits=st.floats(1e4, 1e8),
    cycles=st.floats(1e6, 1e10),
    cpu_hz=st.floats(1e8, 5e9),
    gain_db=st.floats(-130, -80),
    bandwidth_hz=st.floats(1e5, 2e7),
)
def test_work_that_exactly_fills_the_plans_deadline_is_not_dropped(k, model_bits, cycles, cpu_hz, gain_db,
                                                                    bandwidth_hz):
    """K identical TDMA uploads after one compute phase end at C_train + K·C3: the deadline the plan computes."""
    system = SystemConfig(n_devices=k, bandwidth_hz=bandwidth_hz, channel_gain_db=gain_db, cpu_freq_hz=cpu_hz)
    workload = WorkloadConfig(cycles_per_sample=cycles, samples_per_device=1, model_bits=model_bits)
    rate = shannon_rate_bps(bandwidth_hz, system.fixed_gain, system.tx_power_w[0], system.noise_psd_w_per_hz)
    consts = feasibility_constants(100.0, cycles, 0.0, 0.0, cpu_hz, model_bits, rate)
    deadline_s = (100.0 - consts.c1_s) + k * consts.c3_s  # what one round needs, as the plan adds it up
    budget = BudgetConfig(total_time_s=3 * deadline_s, rounds=3, round_mode="deadline", deadline_s=deadline_s)
    sim = Simulation(system, budget, ParametricBackend(k, k, workload))
    for record in sim.run():
        assert record.dropped == () and len(record.arrived) == k
        assert record.duration_s <= deadline_with_tolerance_s(deadline_s)
    # shorter by more than the tolerance (1e-12·max(1, D) s, an absolute 1e-12 s below D = 1 s)
    late_s = deadline_s * (1 - 1e-9) - 2e-12
    late = BudgetConfig(total_time_s=3 * deadline_s, rounds=3, round_mode="deadline", deadline_s=late_s)
    assert Simulation(system, late, ParametricBackend(k, k, workload)).run_round().dropped != ()


# --- bad input is ConfigError, never anything else -----------------------------------------------------------------

KEYS = {
    "system": ["n_devices", "bandwidth_hz", "noise_psd_dbm_per_hz", "tx_power_dbm", "channel_gain_db", "cpu_freq_hz",
               "access", "cell_radius_m", "min_distance_m", "rayleigh_fading", "mobility", "nope"],
    "budget": ["total_time_s", "rounds", "round_mode", "deadline_s", "nope"],
    "workload": ["local_iterations", "cycles_per_sample", "samples_per_device", "model_bits", "sr_cycles",
                 "cycles_source", "nope"],
    "run": ["algorithms", "clients_per_round", "rounds", "max_time_s", "accuracy_thresholds", "backend",
            "checkpoint_every", "eval_every", "nope"],
    "data": ["dataset", "partition", "alpha", "data_dir", "nope"],
    "train": ["model", "lr", "batch_size", "executor", "nope"],
    "parametric": ["a0", "a_max", "rate", "download_bits", "nope"],
}
scalars = st.one_of(
    st.integers(-10**12, 10**12), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
    st.sampled_from(["tdma", "fdma", "sync", "deadline", "auto", "parametric", "torch", "digits", "cnn", "", "x"]),
    st.text(max_size=8),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.sampled_from(["a", "b"]), scalars,
                                                                          max_size=2))
tables = st.fixed_dictionaries({}, optional={
    section: st.dictionaries(st.sampled_from(keys), values, max_size=4) for section, keys in KEYS.items()
}).flatmap(lambda d: st.fixed_dictionaries({k: st.just(v) for k, v in d.items()}, optional={
    "name": st.one_of(st.text(max_size=6), st.integers()), "seed": st.one_of(st.integers(-3, 10**6), st.text(max_size=3)),
    "colour": scalars,
}))
key_text = st.one_of(st.sampled_from([f"{s}.{k}" for s, keys in KEYS.items() for k in keys] + ["seed", "name", ""]),
                     st.text(alphabet=string.ascii_letters + "._=", max_size=12))
value_text = st.one_of(st.text(max_size=10), st.sampled_from(["1e6", "-1", "0", "[1, 2]", "'fdma'", "true", "{a=1}",
                                                            "1e308", "3.98e-21", "nan", "inf", "[", "\"x"]))
set_strings = st.one_of(st.builds(lambda k, v: f"{k}={v}", key_text, value_text), st.text(max_size=15))
grid_strings = st.one_of(
    st.builds(lambda k, vs: f"{k}={','.join(vs)}", key_text, st.lists(value_text, min_size=0, max_size=3)),
    st.text(max_size=15),
)


@SETTINGS
@given(table=tables, sets=st.lists(set_strings, max_size=3))
def test_any_scenario_table_and_set_validates_or_is_a_config_error(tmp_path, table, sets):
    path = tmp_path / "gen.toml"
    try:
        path.write_text(tomli_w.dumps(table))
    except (TypeError, ValueError):  # not representable as TOML (e.g. mixed-type arrays): write raw text
        path.write_text(repr(table))
    try:
        from edgesim.scenarios.schema import load_scenario

        load_scenario(path, sets)
    except ConfigError:
        pass


@SETTINGS
@given(grid=st.lists(grid_strings, min_size=1, max_size=2), seeds=st.one_of(st.none(), st.integers(-2, 3)))
def test_any_grid_string_parses_or_is_a_config_error(grid, seeds):
    from edgesim.scenarios.sweep import make_spec, validate_runs

    try:
        spec = make_spec(None, grid, seeds, ["run.backend='parametric'"])
        if len(spec.runs()) <= 4:
            validate_runs(spec, "/nonexistent/sweep")
    except ConfigError:
        pass


cells = st.one_of(st.sampled_from(["", "0", "1.5", "nan", "inf", "abc", "fedavg", "-1", "1e400", "\"", "a,b"]),
                  st.text(max_size=5))
HEADERS = ["algorithm", "round", "time_s", "accuracy", "cum_bits_up", "cum_energy_j", "K"]


@SETTINGS
@given(header=st.lists(st.sampled_from(HEADERS), max_size=7, unique=True),
       rows=st.lists(st.lists(cells, max_size=8), max_size=4), raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_any_malformed_rounds_csv_reads_or_is_a_config_error(tmp_path, header, rows, raw):
    from edgesim.plots.curves import collect

    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    text = "\n".join(",".join(r) for r in [header, *rows]) + "\n"
    (run_dir / "rounds.csv").write_bytes(raw if raw is not None else text.encode())
    try:
        series = collect([run_dir], "time_s")
        assert all(np.isfinite(xs).all() for runs in series.values() for xs, _ in runs)
    except ConfigError:
        pass


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(cells, min_size=4, max_size=4), max_size=3),
       spec=st.one_of(st.just('{"grid": [{"key": "system.bandwidth_hz", "values": [1e6]}]}'),
                      st.text(max_size=20), st.just('{"grid": 3}'), st.just("[]")))
def test_any_malformed_sweep_folder_reads_or_is_a_config_error(tmp_path, rows, spec):
    from edgesim.plots.sweep import Sweep

    folder = tmp_path / "sweep"
    folder.mkdir(exist_ok=True)
    (folder / "sweep.json").write_text(spec)
    header = ["run", "system.bandwidth_hz", "status", "fedavg_final_accuracy"]
    (folder / "sweep.csv").write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    try:
        sweep = Sweep(folder)
        for point in sweep.points():
            sweep.metric(point, "fedavg_final_accuracy")
    except ConfigError:
        pass


# --- [algorithms.*] tables of every registered algorithm, and the parametric backend ------------------------------

ALGORITHM_KEYS = {name: [f.name for f in __import__("dataclasses").fields(spec.config_cls)] + ["nope"]
                  for name, spec in ALGORITHMS.items()}
algorithm_tables = st.sampled_from(sorted(ALGORITHMS)).flatmap(lambda name: st.tuples(
    st.just(name), st.dictionaries(st.sampled_from(ALGORITHM_KEYS[name]), values, max_size=4)))


@SETTINGS
@given(tables=st.lists(algorithm_tables, min_size=1, max_size=3), n_devices=st.integers(1, 12),
       partition=st.sampled_from(["dirichlet", "labels_at_server", "iid", "subset"]),
       model=st.sampled_from(["cnn", "text", "resnet9"]), run_them=st.booleans())
def test_any_algorithms_table_validates_or_is_a_config_error(tmp_path, tables, n_devices, partition, model, run_them):
    """Every registered algorithm's table, run or not, on any cell: validates or is one ConfigError."""
    from edgesim.scenarios.schema import load_scenario

    algs = {name: table for name, table in tables}
    scenario = {"system": {"n_devices": n_devices}, "data": {"partition": partition}, "train": {"model": model},
                "run": {"clients_per_round": 1, **({"algorithms": sorted(algs)} if run_them else {})},
                "algorithms": algs}
    path = tmp_path / "algs.toml"
    try:
        path.write_text(tomli_w.dumps(scenario))
    except (TypeError, ValueError):
        path.write_text(repr(scenario))
    try:
        load_scenario(path)
    except ConfigError:
        pass


@SETTINGS
@given(table=st.dictionaries(st.sampled_from(["a0", "a_max", "rate", "download_bits", "nope"]),
                             st.one_of(scalars, st.floats(allow_nan=True, allow_infinity=True)), max_size=4),
       rounds=st.integers(1, 3))
@example(table={"a0": 0.9, "a_max": 0.5}, rounds=2)
@example(table={"download_bits": 1e300}, rounds=1)
def test_any_parametric_table_validates_or_is_a_config_error_and_runs(tmp_path, table, rounds):
    """A physics-only scenario's [parametric] table: refused with one ConfigError, or its run's accuracies
    stay in [0, 1] and its bits are finite."""
    from edgesim.scenarios.schema import load_scenario

    path = tmp_path / "par.toml"
    scenario = {"workload": {"model_bits": 1e6}, "budget": {"rounds": rounds}, "run": {"backend": "parametric"},
                "parametric": table}
    try:
        path.write_text(tomli_w.dumps(scenario))
    except (TypeError, ValueError):
        path.write_text(repr(scenario))
    try:
        sc = load_scenario(path)
    except ConfigError:
        return
    p, run = sc.parametric, sc.learning["run"]
    backend = ParametricBackend(sc.system.n_devices, run.clients_per_round, sc.workload, sc.seed, a0=p.a0,
                                a_max=p.a_max, rate=p.rate, download_bits=p.download_bits)
    accuracies = []
    for rec in Simulation(sc.system, sc.budget, backend, seed=sc.seed).run():
        accuracies.append(rec.metrics["accuracy"])
        assert 0 <= rec.metrics["accuracy"] <= 1 and rec.bits_down <= 1e15 * sc.system.n_devices
    assert accuracies == sorted(accuracies)  # the curve rises (a0 <= a_max)
