"""Labels at the server (learning/algorithms/fedmix.py, fedmatch.py): FedFreq weights and the three-way mix
by hand, the server phase on the clock, σ/ψ never leaking, FedMatch's helpers on a tiny case, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesim.engine import Simulation
from learning.algorithms import REGISTRY
from learning.algorithms.fedmix import FedMixConfig, argmax_pseudo_labels, fedfreq_weights, mix, squared_distance
from learning.context import build_context
from learning.costs import task_cycles
from scenarios.schema import load_scenario

TINY = """
name = "tiny_las"
seed = 3

[system]
n_devices = 8
bandwidth_hz = 1e6
channel_gain_db = -100
cpu_freq_hz = 1e9
server_freq_hz = 2e9

[budget]
total_time_s = 100
rounds = 10

[workload]
cycles_per_sample = 3e6
model_bits = "auto"

[data]
dataset = "digits"
partition = "labels_at_server_iid"
server_labeled = 200
test_size = 100

[train]
model = "cnn"
lr = 0.05

[run]
algorithms = ["fedmix"]
clients_per_round = 3

[algorithms.fedmix]
batch_size = 32
server_batch_size = 50
"""


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny_las.toml"
    p.write_text(TINY)
    return p


def setup(path, name, *overrides):
    sc = load_scenario(path, list(overrides))
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    cfg = sc.learning["algorithms"].get(name) or REGISTRY[name].config_cls()
    return sc, ctx, REGISTRY[name].build(ctx, cfg)


# --------------------------------------------------------------------------- FedFreq and the mix by hand


def test_fedfreq_weights_by_hand():
    # c = (1, 2, 4): 1/c = (1, .5, .25), sum 1.75
    assert fedfreq_weights([1, 2, 4]) == pytest.approx([1 / 1.75, 0.5 / 1.75, 0.25 / 1.75])
    # power 2: (1, .25, .0625) / 1.3125
    assert fedfreq_weights([1, 2, 4], 2.0) == pytest.approx([1 / 1.3125, 0.25 / 1.3125, 0.0625 / 1.3125])
    # limiting cases: power 0 and equal counts are uniform
    assert fedfreq_weights([1, 5, 9], 0.0) == pytest.approx([1 / 3] * 3)
    assert fedfreq_weights([7, 7]) == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match="counts"):
        fedfreq_weights([0, 1])


def test_fedfreq_weights_sum_to_one_and_fall_with_the_count():
    rng = np.random.default_rng(0)
    for _ in range(20):
        c = rng.integers(1, 50, size=6)
        w = np.asarray(fedfreq_weights(c.tolist(), float(rng.uniform(0.1, 3))))
        assert w.sum() == pytest.approx(1.0)
        order = np.argsort(c)
        assert np.all(np.diff(w[order]) <= 1e-15)  # more rounds trained → no more weight


def test_three_way_mix_by_hand():
    psi, sigma, theta = {"w": torch.tensor([1.0, 0.0])}, {"w": torch.tensor([0.0, 2.0])}, {"w": torch.tensor([4.0, 4.0])}
    # 0.5·(1, 0) + 0.3·(0, 2) + 0.2·(4, 4) = (1.3, 1.4)
    assert torch.allclose(mix(psi, sigma, theta, 0.5, 0.3, 0.2)["w"], torch.tensor([1.3, 1.4]))
    assert torch.equal(mix(psi, sigma, theta, 1.0, 0.0, 0.0)["w"], psi["w"])  # FedFreq alone: θ = ψ̄
    same = mix(theta, theta, theta, 0.2, 0.3, 0.5)["w"]
    assert torch.allclose(same, theta["w"])  # a convex mix of equal models is that model


def test_config_checks_alpha_beta_gamma_sum():
    with pytest.raises(ValueError, match=r"alpha \+ beta \+ gamma = 1.1.*expected 1"):
        FedMixConfig(alpha=0.5, beta=0.3, gamma=0.3)
    with pytest.raises(ValueError, match="beta"):
        FedMixConfig(alpha=1.2, beta=-0.2, gamma=0.0)
    with pytest.raises(ValueError, match="weighting"):
        FedMixConfig(weighting="often")
    assert FedMixConfig(alpha=1 / 3, beta=1 / 3, gamma=1 / 3).alpha == pytest.approx(1 / 3)


def test_argmax_pseudo_labels_average_the_perturbations():
    p1 = torch.tensor([[0.9, 0.1], [0.6, 0.4]])
    p2 = torch.tensor([[0.7, 0.3], [0.2, 0.8]])
    label, mask = argmax_pseudo_labels([p1, p2], 0.75)
    # q = (0.8, 0.2) and (0.4, 0.6): labels 0, 1; confident only the first
    assert label.tolist() == [0, 1] and mask.tolist() == [1.0, 0.0]
    assert argmax_pseudo_labels([p1, p2], 0.0)[1].tolist() == [1.0, 1.0]


def test_squared_distance_by_hand():
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([3.0])}
    b = {"s/w": torch.tensor([0.0, 0.0]), "s/b": torch.tensor([1.0])}
    assert float(squared_distance(a, b, "s/")) == pytest.approx(1 + 4 + 4)


# --------------------------------------------------------------------------- FedMix on the clock


def test_fedmix_round_on_the_clock(tiny):
    sc, ctx, alg = setup(tiny, "fedmix")
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    rec = sim.run_round()
    # the server trains σ on its 200 labelled samples, 1 epoch: 200·C_tra cycles at 2 GHz, before the broadcast
    assert rec.server_before_s == pytest.approx(200 * 3e6 / 2e9) and rec.server_after_s == 0.0
    assert rec.bits_down == pytest.approx(3 * 2 * ctx.model_bits) and rec.bits_up == pytest.approx(3 * ctx.model_bits)
    for row in rec.devices:
        n = ctx.clients[row.device].x_unl.shape[0]
        assert row.compute_s == pytest.approx(n * 3e6 * (1 + 2 / 3) / 1e9)
        assert task_cycles(alg.task, {"unl": n}, 3e6) == pytest.approx(n * 3e6 * 5 / 3)
    first = [e for e in sim.events if e.device >= 0][0]
    assert first.time_s == pytest.approx(rec.server_before_s)  # no device starts before the server is done
    assert 0 <= rec.metrics["accuracy"] <= 1 and "mask_rate" in rec.metrics and "server_loss" in rec.metrics
    assert alg.counts.sum() == 3 and set(np.flatnonzero(alg.counts)) == set(rec.arrived)


def test_fedmix_needs_a_server_set(tiny):
    with pytest.raises(ValueError, match="labelled set at the server"):
        setup(tiny, "fedmix", 'data.partition="iid"')


def test_fedmix_counts_weigh_frequent_clients_less(tiny):
    sc, ctx, alg = setup(tiny, "fedmix")
    alg.counts[:] = [1, 2, 4, 1, 1, 1, 1, 1]
    assert alg.weights([0, 1, 2]) == pytest.approx(fedfreq_weights([1, 2, 4]))
    _, _, samples = setup(tiny, "fedmix_samples")
    assert samples.weights([0, 1]) == [float(ctx.clients[0].x_unl.shape[0]), float(ctx.clients[1].x_unl.shape[0])]
    assert REGISTRY["fedfreq"].config_cls().alpha == 1.0 and REGISTRY["fedfreq"].config_cls().weighting == "freq"


def test_fedmix_resume_is_identical(tiny):
    sc, ctx, a = setup(tiny, "fedmix")
    sim = Simulation(sc.system, sc.budget, a, seed=sc.seed)
    full = [r.metrics for r in sim.run(3)]
    _, _, b = setup(tiny, "fedmix")
    sim_b = Simulation(sc.system, sc.budget, b, seed=sc.seed)
    sim_b.run(1)
    engine, backend = sim_b.state_dict(), b.state_dict()
    _, _, c = setup(tiny, "fedmix")
    sim_c = Simulation(sc.system, sc.budget, c, seed=sc.seed)
    sim_c.load_state_dict(engine)
    c.load_state_dict(backend)
    assert [r.metrics for r in sim_c.run(2)] == full[1:]
