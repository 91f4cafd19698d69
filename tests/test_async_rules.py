"""Asynchronous rules as registered objects (edgesim.async_rules): FedAsync and FedBuff as two entries, a
rule registered in-process run on the clock by hand, names refused twice, the one default of concurrency, and
the learning side's combine step looked up by name."""

from __future__ import annotations

import math

import pytest

from edgesim.async_rules import (
    ASYNC_RULES,
    AsyncRule,
    FedAsync,
    FedBuff,
    FedBuffOptions,
    is_asynchronous,
    register_async_rule,
    round_modes,
    rule_of,
)
from edgesim.asynchrony import DEFAULT_CONCURRENCY, AsyncConfig, AsyncSimulation
from edgesim.config import BudgetConfig, ConfigError, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.radio import shannon_rate_bps


def cell(cpu_freq_hz):
    system = SystemConfig(n_devices=len(cpu_freq_hz), bandwidth_hz=1e6, tx_power_dbm=23.0, channel_gain_db=-110.0,
                          cpu_freq_hz=list(cpu_freq_hz))
    rate = float(shannon_rate_bps(1e6, system.fixed_gain, system.tx_power_w[0], system.noise_psd_w_per_hz))
    return system, WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=1000,
                                  model_bits=0.4 * rate)  # 1e9 cycles, 0.4 s on air


class Recording(ParametricBackend):
    """The parametric backend, keeping every aggregation it is handed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def aggregate(self, aggregation):
        self.seen.append(aggregation)
        return super().aggregate(aggregation)


def test_fedasync_and_fedbuff_are_two_entries_of_the_one_registry():
    assert ASYNC_RULES["fedasync"] is FedAsync and ASYNC_RULES["fedbuff"] is FedBuff
    assert round_modes()[:4] == ("sync", "deadline", "fedasync", "fedbuff")
    assert is_asynchronous("fedbuff") and not is_asynchronous("deadline") and not is_asynchronous("nope")
    cfg = AsyncConfig(concurrency=3, alpha=0.5, buffer_size=2, server_lr=0.7).resolved()
    fedasync, fedbuff = FedAsync(cfg), FedBuff(cfg)
    assert fedasync.opts.alpha == 0.5 and fedbuff.opts == FedBuffOptions(buffer_size=2, server_lr=0.7)
    assert fedasync.flush(1) and [fedbuff.flush(k) for k in (1, 2, 3)] == [False, True, True]
    assert fedbuff.weight(3) == pytest.approx(0.5)  # the table's polynomial s = (3 + 1)^-0.5
    assert (FedAsync.combine_name(), FedBuff.combine_name()) == ("fedasync", "fedbuff")
    with pytest.raises(ValueError, match=r"round_mode = 'sync': expected an asynchronous rule, one of 'fedasync'"):
        rule_of("sync")


def test_a_name_registered_twice_is_refused_in_one_line_naming_both():
    with pytest.raises(ValueError, match=r"asynchronous rule 'fedbuff' is registered by "
                                         r"edgesim.async_rules.FedBuff and again by "
                                         r"test_async_rules.*Impostor; expected one rule per name") as info:
        @register_async_rule("fedbuff")
        class Impostor(AsyncRule):
            def flush(self, buffered):
                return True
    assert "\n" not in str(info.value) and ASYNC_RULES["fedbuff"] is FedBuff
    with pytest.raises(ValueError, match="other than 'sync' and 'deadline'"):
        register_async_rule("deadline")


def test_a_rule_whose_options_the_table_lacks_is_one_line():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Needs:
        momentum: float

    @register_async_rule("_test_needs")
    class NeedsMomentum(AsyncRule):
        options = Needs

        def flush(self, buffered):
            return True

    try:
        with pytest.raises(ValueError, match=r"rule '_test_needs': its options Needs name 'momentum', which the "
                                             r"\[async\] table does not have"):
            NeedsMomentum(AsyncConfig().resolved(n_devices=2))
    finally:
        ASYNC_RULES.pop("_test_needs")


def test_an_unknown_round_mode_names_the_registered_rules():
    with pytest.raises(ConfigError, match=r"round_mode = 'fedavgx': expected one of 'sync', 'deadline', "
                                          r"'fedasync', 'fedbuff'"):
        BudgetConfig(round_mode="fedavgx")


def test_concurrency_has_one_default():
    assert AsyncConfig().resolved(clients_per_round=4).concurrency == 4  # a scenario: [run] clients_per_round
    assert AsyncConfig().resolved(n_devices=3).concurrency == 3  # by hand: at most the cell
    assert AsyncConfig().resolved(n_devices=50).concurrency == DEFAULT_CONCURRENCY
    assert AsyncConfig(concurrency=2).resolved(clients_per_round=4, n_devices=3).concurrency == 2  # set: kept
    assert AsyncConfig().resolved(clients_per_round=4).buffer_size == 4  # unset K: the concurrency
    system, workload = cell([1e9] * 12)
    sim = AsyncSimulation(system, BudgetConfig(round_mode="fedbuff"), ParametricBackend(12, 12, workload))
    assert sim.cfg.concurrency == DEFAULT_CONCURRENCY == 10 and sim.cfg.buffer_size == 10


def test_a_rule_registered_in_process_runs_on_the_clock_by_hand():
    @register_async_rule("_test_cutoff")
    class Cutoff(AsyncRule):
        """FedBuff's K; an update more than staleness_b versions old weighs 0."""

        options = FedBuffOptions
        combine = "fedbuff"

        def flush(self, buffered):
            return buffered >= self.opts.buffer_size

        def weight(self, staleness):
            return 1.0 if staleness <= self.cfg.staleness_b else 0.0

    try:
        # FedBuff's two-device timeline (tests/test_asynchrony.py): flush 0 at 2.8 (d0 twice, stale 0, 0), flush 1
        # at 4.2 (d1 from v0, stale 1; d0 from v1, stale 0). With b = 0 the stale one weighs 0, the others 1.
        system, workload = cell([1e9, 0.4e9])
        backend = Recording(2, 2, workload)
        sim = AsyncSimulation(system, BudgetConfig(rounds=2, round_mode="_test_cutoff"), backend,
                              AsyncConfig(concurrency=2, buffer_size=2, staleness_b=0.0), seed=0)
        recs = sim.run()
        assert [(round(r.end_time_s, 9), r.arrived) for r in recs] == [(2.8, (0, 0)), (4.2, (1, 0))]
        assert [[(a.staleness, a.weight) for a in agg.arrivals] for agg in backend.seen] == [
            [(0, 1.0), (0, 1.0)], [(1, 0.0), (0, 1.0)]]
        assert {(agg.mode, agg.combine) for agg in backend.seen} == {("_test_cutoff", "fedbuff")}
        assert BudgetConfig(round_mode="_test_cutoff").round_mode == "_test_cutoff" and is_asynchronous("_test_cutoff")
    finally:
        ASYNC_RULES.pop("_test_cutoff")


def test_the_learning_side_combines_by_the_rules_step(tiny_scenario):
    torch = pytest.importorskip("torch")
    from edgesim.learning.algorithms.fedavg.asynchronous import COMBINES, register_async_combine
    from edgesim.scenarios.algorithm_run import make_backends, make_simulation
    from edgesim.scenarios.schema import load_scenario

    assert set(COMBINES) >= {"fedasync", "fedbuff"}
    with pytest.raises(ValueError, match=r"combine step 'fedbuff' is registered by .*fedbuff_combine and again by "
                                         r".*other; expected one step per name"):
        @register_async_combine("fedbuff")
        def other(backend, agg, current, shared):
            pass

    calls = []

    @register_async_rule("_test_mean")
    class Mean(AsyncRule):
        """Every arrival at once; the server takes the plain mean of the new models (its own step)."""

        def flush(self, buffered):
            return buffered >= 2

    @register_async_combine("_test_mean")
    def mean_step(backend, agg, current, shared):
        calls.append(len(shared))
        backend.inner.server_step([(x, 1.0) for x in shared])

    try:
        sc = load_scenario(tiny_scenario, ["budget.rounds=3", "run.algorithms=fedavg", "budget.round_mode=_test_mean",
                                           "async.concurrency=3"])
        build, _, _ = make_backends(sc)
        sim = make_simulation(sc, build("fedavg"), "fedavg")
        recs = sim.run()
        assert len(recs) == 3 and calls == [2, 2, 2]
        state = sim.backend.inner.global_state
        assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
        assert all(0 <= r.metrics["accuracy"] <= 1 for r in recs) and not math.isnan(recs[-1].end_time_s)
    finally:
        ASYNC_RULES.pop("_test_mean")
        COMBINES.pop("_test_mean")
