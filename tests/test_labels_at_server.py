"""Labels at the server (learning/algorithms/fedmix/algorithm.py, fedmatch.py): FedFreq weights and the three-way mix
by hand, the server phase on the clock, σ/ψ never leaking, FedMatch's helpers on a tiny case, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.fedmatch.algorithm import (
    PSI,
    FedMatchConfig,
    agreement_vote,
    choose_helpers,
    compose,
    hard_threshold,
)
from edgesim.learning.algorithms.fedmix.algorithm import (
    ANCHOR,
    FedMixConfig,
    argmax_pseudo_labels,
    client_loss,
    fedfreq_weights,
    mean_squared_distance,
    mix,
)
from edgesim.learning.context import build_context
from edgesim.learning.costs import task_cycles
from edgesim.scenarios.schema import load_scenario

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
    sc = load_scenario(path, [f'run.algorithms=["{name}"]', *overrides])  # the scenario runs what is built
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


def test_mean_squared_distance_by_hand():
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([3.0])}
    b = {"s/w": torch.tensor([0.0, 0.0]), "s/b": torch.tensor([1.0])}
    assert float(mean_squared_distance(a, b, "s/")) == pytest.approx((1 + 4 + 4) / 3)  # over P = 3 entries
    assert float(mean_squared_distance(a, {"s/" + k: v for k, v in a.items()}, "s/")) == 0.0  # limiting case
    w = torch.tensor([1.0, 2.0], requires_grad=True)  # property: the gradient is 2(a - b)/P per entry
    mean_squared_distance({"w": w, "b": torch.tensor([3.0])}, b, "s/").backward()
    assert w.grad.tolist() == pytest.approx([2 * 1 / 3, 2 * 2 / 3])


class _FakeNet:
    """What a loss sees of the executor: logits per batch key, the trained and the frozen parameters."""

    def __init__(self, logits, params, fixed):
        self._logits, self.params, self.fixed = logits, params, fixed

    def logits(self, b, *keys):
        return tuple(self._logits[k] for k in keys)


class _FakeBatch(dict):
    def mean(self, v, key):
        return v.mean()


def test_fedmix_client_loss_terms_by_hand():
    import math

    # two rows, two classes; label views (A = 2) give q = (0.8, 0.2) and (0.4, 0.6); only row 0 is confident
    lg = {"u_a0": torch.log(torch.tensor([[0.9, 0.1], [0.6, 0.4]])), "u_a1": torch.log(torch.tensor([[0.7, 0.3], [0.2, 0.8]])),
          "u_pi": torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))}
    params = {"w": torch.tensor([1.0, 3.0])}
    fixed = {ANCHOR + "w": torch.tensor([0.0, 1.0])}  # pull = (1 + 4) / 2 = 2.5
    b = _FakeBatch()
    cfg = FedMixConfig(lambda_1=2.0, lambda_c=0.5, lambda_2=0.1, n_views=2, threshold=0.75, labeller="psi", pull="mean")
    total, aux = client_loss(cfg)(_FakeNet(lg, params, fixed), b, None)
    unsup = (1.0 * math.log(2) + 0.0) / 2  # CE(0, (0.5, 0.5)) on the confident row, mean over both rows
    def kl(q):
        return sum(qi * math.log(qi / 0.5) for qi in q)

    consistency = (kl([0.8, 0.2]) + kl([0.4, 0.6])) / 2
    assert float(aux["loss_u"]) == pytest.approx(unsup, rel=1e-5)
    assert float(aux["loss_c"]) == pytest.approx(consistency, rel=1e-5)
    assert float(aux["pull"]) == pytest.approx(2.5)
    assert float(total) == pytest.approx(2.0 * unsup + 0.5 * consistency + 0.1 * 2.5, rel=1e-5)
    assert float(aux["mask_rate"]) == pytest.approx(0.5)
    # limiting case: the unlabelled terms off leave the pull alone, and no consistency key is computed
    off, aux_off = client_loss(FedMixConfig(lambda_1=0.0, lambda_2=0.1, labeller="psi", pull="mean"))(
        _FakeNet(lg, params, fixed), b, None)
    assert float(off) == pytest.approx(0.25) and "loss_c" not in aux_off


# --------------------------------------------------------------------------- FedMix on the clock


def test_fedmix_round_on_the_clock(tiny):
    sc, ctx, alg = setup(tiny, "fedmix")
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    rec = sim.run_round()
    # the server trains σ on its 200 labelled samples, 1 epoch: 200·C_tra cycles at 2 GHz, before the broadcast
    assert rec.server_before_s == pytest.approx(200 * 3e6 / 2e9) and rec.server_after_s == 0.0
    # only θ goes down (σ stays at the server unless send_sigma); ψ comes up
    assert rec.bits_down == pytest.approx(3 * ctx.model_bits) and rec.bits_up == pytest.approx(3 * ctx.model_bits)
    for row in rec.devices:
        n = ctx.clients[row.device].x_unl.shape[0]
        assert row.compute_s == pytest.approx(n * 3e6 * (1 + 2 / 3) / 1e9)
        assert task_cycles(alg.task, {"unl": n}, 3e6) == pytest.approx(n * 3e6 * 5 / 3)
    first = [e for e in sim.events if e.device >= 0][0]
    assert first.time_s == pytest.approx(rec.server_before_s)  # no device starts before the server is done
    assert 0 <= rec.metrics["accuracy"] <= 1 and "mask_rate" in rec.metrics and "server_loss" in rec.metrics
    assert alg.counts.sum() == 3 and set(np.flatnonzero(alg.counts)) == set(rec.arrived)


def test_fedmix_send_sigma_and_views_are_charged(tiny):
    sc, ctx, alg = setup(tiny, "fedmix", "algorithms.fedmix.send_sigma=true", "algorithms.fedmix.n_views=4")
    rec = Simulation(sc.system, sc.budget, alg, seed=sc.seed).run_round()
    assert rec.bits_down == pytest.approx(3 * 2 * ctx.model_bits)  # θ and σ
    for row in rec.devices:  # one training pass and A = 4 label forwards (1/3 pass each) per unlabelled row
        assert row.compute_s == pytest.approx(ctx.clients[row.device].x_unl.shape[0] * 3e6 * (1 + 4 / 3) / 1e9)


@pytest.mark.parametrize("start,send", [("theta", False), ("persist", True)])
def test_fedmix_sigma_start_and_anchor(tiny, monkeypatch, start, send):
    """σ^t starts from θ^t or from σ^{t-1}; the clients' anchor is σ^t when it is sent, else θ^t."""
    import edgesim.learning.algorithms.fedmix.algorithm as fedmix_module

    server_starts, client_starts = [], []
    real_server, real_devices = fedmix_module.train_at_server, fedmix_module.train_devices
    monkeypatch.setattr(fedmix_module, "train_at_server",
                        lambda ctx, name, r, st, *a: server_starts.append(dict(st)) or real_server(ctx, name, r, st, *a))
    monkeypatch.setattr(fedmix_module, "train_devices",
                        lambda ctx, name, r, sel, st, *a: client_starts.append(st) or real_devices(ctx, name, r, sel, st, *a))
    sc, ctx, alg = setup(tiny, "fedmix", f'algorithms.fedmix.sigma_start="{start}"', f"algorithms.fedmix.send_sigma={str(send).lower()}")
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    sim.run_round()
    sigma0, theta1 = {k: v.clone() for k, v in alg.sigma.items()}, {k: v.clone() for k, v in alg.theta.items()}
    sim.run_round()
    want = sigma0 if start == "persist" else theta1
    assert all(torch.equal(server_starts[1][k], want[k]) for k in want)
    anchor = alg.sigma if send else theta1
    for st in client_starts[1]:
        assert all(torch.equal(st[ANCHOR + k], anchor[k]) for k in alg.param_keys)
        assert all(torch.equal(st[k], theta1[k]) for k in alg.param_keys)  # ψ starts from θ^t
    assert not any(k.startswith(ANCHOR) for k in alg.theta)


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


# --------------------------------------------------------------------------- FedMatch



def test_hard_threshold_and_compose_by_hand():
    psi = torch.tensor([0.5, -1e-6, 2e-5, -3e-5])
    assert hard_threshold(psi, 1e-5).tolist() == pytest.approx([0.5, 0.0, 2e-5, -3e-5])
    assert torch.equal(hard_threshold(psi, 0.0), psi)  # limiting case: threshold 0 keeps every non-zero
    assert hard_threshold(psi, 1.0).abs().sum() == 0
    theta = compose({"w": torch.tensor([1.0, 1.0])}, {PSI + "w": torch.tensor([0.25, 1e-7])}, ["w"], 1e-5)
    assert theta["w"].tolist() == [1.25, 1.0]


def test_agreement_vote_by_hand():
    own = torch.tensor([[0.6, 0.4, 0.0], [0.1, 0.2, 0.7], [0.5, 0.3, 0.2]])
    h1 = torch.tensor([[0.1, 0.9, 0.0], [0.0, 0.9, 0.1], [0.2, 0.7, 0.1]])
    h2 = torch.tensor([[0.0, 0.8, 0.2], [0.0, 0.1, 0.9], [0.1, 0.1, 0.8]])
    # row 0: votes (1, 2, 0) → 1; row 1: (0, 1, 2) → 2; row 2: one each → the lowest class, 0
    assert agreement_vote(own, [h1, h2]).tolist() == [1, 2, 0]
    assert agreement_vote(own, []).tolist() == [0, 2, 0]  # no helpers: the own argmax


def test_choose_helpers_tiny_case():
    vectors = {0: np.array([0.0, 0.0]), 3: np.array([1.0, 0.0]), 5: np.array([0.0, 3.0]), 7: np.array([0.9, 0.1]),
               9: np.array([10.0, 10.0])}
    # from client 3 (1, 0): 7 at 0.14, 0 at 1, 5 at 3.2, 9 at 13.5
    assert choose_helpers(vectors, 3, 2) == [7, 0]
    assert choose_helpers(vectors, 0, 2) == [7, 3]
    assert choose_helpers(vectors, 9, 1) == [5]  # (0, 3) is 12.2 away, (1, 0) 13.5
    assert choose_helpers(vectors, 4, 2) == []  # never embedded: no helpers
    assert choose_helpers(vectors, 3, 0) == []
    assert choose_helpers({1: np.zeros(2), 2: np.ones(2)}, 1, 2) == [2]  # fewer clients than H


def test_fedmatch_config_checks():
    with pytest.raises(ValueError, match="labels"):
        FedMatchConfig(labels="both")
    with pytest.raises(ValueError, match="helper_interval"):
        FedMatchConfig(helper_interval=0)
    lc = REGISTRY["fedmatch_lc"].config_cls()
    assert (lc.labels, lc.lambda_l1, lc.l1_threshold) == ("client", 1e-4, 5e-6)


def test_fedmatch_round_on_the_clock_and_helpers_sent(tiny):
    sc, ctx, alg = setup(tiny, "fedmatch", "algorithms.fedmatch.batch_size=32", "algorithms.fedmatch.server_batch_size=50",
                         "algorithms.fedmatch.helper_interval=2")
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    rec = sim.run_round()
    c = 3e6
    assert rec.server_before_s == pytest.approx(200 * c / 2e9)  # σ: one epoch on 200 labelled samples
    assert rec.server_after_s == pytest.approx(3 * c / 3 / 2e9)  # 3 restored models on one noise image
    psi_bits = ctx.bits_of([k for k, _ in ctx.model.named_parameters()])
    assert rec.bits_up == pytest.approx(3 * psi_bits)
    assert rec.bits_down == pytest.approx(3 * (ctx.model_bits + psi_bits))
    for row in rec.devices:
        assert row.compute_s == pytest.approx(ctx.clients[row.device].x_unl.shape[0] * c * 2 / 1e9)
    assert set(alg.vectors) == set(rec.arrived) and "mask_rate" in rec.metrics
    # rounds 1, 3, 5 are helper rounds ((r + 1) % 2 = 0): an embedded client gets its H = 2 nearest, each ψ sent down
    seen_helped = 0
    for r in range(1, 6):
        before = dict(alg.vectors)
        rec = sim.run_round()
        for d, h in alg.helpers.items():
            assert h == (choose_helpers(before, d, 2) if r % 2 == 1 else [])
        seen_helped += sum(1 for h in alg.helpers.values() if h)
        for row in rec.devices:
            h = len(alg.helpers[row.device])
            assert row.bits_down == pytest.approx(ctx.model_bits + psi_bits * (1 + h))
            n = ctx.clients[row.device].x_unl.shape[0]
            assert row.compute_s == pytest.approx(n * c * (2 + h / 3) / 1e9)
        assert rec.info["helpers"] == sum(len(h) for h in alg.helpers.values())
    assert seen_helped > 0


def test_fedmatch_helper_rounds_only_every_interval(tiny):
    sc, ctx, alg = setup(tiny, "fedmatch")
    assert [r for r in range(30) if alg.helper_round(r)] == [9, 19, 29]


def test_sigma_psi_split_never_leaks(tiny):
    sc, ctx, alg = setup(tiny, "fedmatch", "algorithms.fedmatch.batch_size=32", "algorithms.fedmatch.server_batch_size=50")
    template = {k: v.clone() for k, v in ctx.model.state_dict().items()}
    sigma0 = {k: v.clone() for k, v in alg.sigma.items()}
    psi0 = {k: v.clone() for k, v in alg.psi.items()}
    _, _, mix_a = setup(tiny, "fedmix")
    theta0 = {k: v.clone() for k, v in mix_a.theta.items()}
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    plan = alg.plan_round(sim.system_view())
    # σ at the server: ψ frozen, bit for bit
    from edgesim.learning.algorithms.common import train_at_server

    res = train_at_server(ctx, "fedmatch", 0, {**alg.sigma, **alg.psi}, alg.server_data, alg.server_task)
    assert all(torch.equal(res.params[0][k], psi0[k]) for k in psi0)
    assert any(not torch.equal(res.params[0][k], sigma0[k]) for k in alg.keys)
    # ψ at the clients: σ frozen, bit for bit
    states, _ = alg._train_clients(0, list(alg.selected))
    for s in states:
        assert all(torch.equal(s[k], sigma0[k]) for k in alg.keys)
        assert any(not torch.equal(s[k], psi0[k]) for k in psi0)
    # nothing an algorithm did touched the shared template or another algorithm of the run
    assert all(torch.equal(v, template[k]) for k, v in ctx.model.state_dict().items())
    assert all(torch.equal(alg.sigma[k], sigma0[k]) for k in sigma0)  # inputs never mutated in place
    assert all(torch.equal(mix_a.theta[k], theta0[k]) for k in theta0)
    assert plan.server_cycles and plan.server_cycles_after


def test_algorithms_of_one_run_do_not_interact(tiny):
    """FedMix alone and FedMix after FedMatch on the same context give identical metrics."""
    sc, ctx, mix_alone = setup(tiny, "fedmix")
    alone = [r.metrics for r in Simulation(sc.system, sc.budget, mix_alone, seed=sc.seed).run(2)]
    cfg = FedMatchConfig(batch_size=32, server_batch_size=50)
    fm = REGISTRY["fedmatch"].build(ctx, cfg)
    Simulation(sc.system, sc.budget, fm, seed=sc.seed).run(2)
    mix_after = REGISTRY["fedmix"].build(ctx, sc.learning["algorithms"]["fedmix"])
    after = [r.metrics for r in Simulation(sc.system, sc.budget, mix_after, seed=sc.seed).run(2)]
    assert alone == after


def test_fedmatch_resume_is_identical(tiny):
    over = ("algorithms.fedmatch.batch_size=32", "algorithms.fedmatch.server_batch_size=50",
            "algorithms.fedmatch.helper_interval=2")
    sc, ctx, a = setup(tiny, "fedmatch", *over)
    full = [r.metrics for r in Simulation(sc.system, sc.budget, a, seed=sc.seed).run(4)]
    _, _, b = setup(tiny, "fedmatch", *over)
    sim_b = Simulation(sc.system, sc.budget, b, seed=sc.seed)
    sim_b.run(2)
    engine, backend = sim_b.state_dict(), b.state_dict()
    _, _, c = setup(tiny, "fedmatch", *over)
    sim_c = Simulation(sc.system, sc.budget, c, seed=sc.seed)
    sim_c.load_state_dict(engine)
    c.load_state_dict(backend)
    assert [r.metrics for r in sim_c.run(2)] == full[2:]


def test_fedmatch_labels_at_client(tiny):
    over = ('data.partition="dirichlet"', "data.alpha=1.0", "algorithms.fedmatch_lc.batch_size=32", "algorithms.fedmatch_lc.lr=0.005")
    sc, ctx, alg = setup(tiny, "fedmatch_lc", *over)
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    sigma0 = {k: v.clone() for k, v in alg.sigma.items()}
    rec = sim.run_round()
    assert rec.server_before_s == 0.0 and rec.server_after_s > 0  # no server training; the embedding only
    psi_bits = ctx.bits_of(alg.keys)
    assert rec.bits_up == pytest.approx(len(rec.arrived) * (ctx.model_bits + psi_bits))
    for row in rec.devices:
        c = ctx.clients[row.device]
        want = task_cycles(alg.task(0), {"lab": c.x_sup.shape[0], "unl": c.x_unl.shape[0]}, 3e6)
        assert row.compute_s == pytest.approx(want / 1e9)
    assert any(not torch.equal(alg.sigma[k], sigma0[k]) for k in alg.keys)  # σ learned at the clients
    assert 0 <= rec.metrics["accuracy"] <= 1 and "loss_s" in rec.metrics
    with pytest.raises(ValueError, match="labelled data on the clients"):
        setup(tiny, "fedmatch_lc")


@pytest.mark.parametrize("name", ["fedmatch", "fedmatch_lc", "fedmix"])
def test_vectorised_equals_sequential(tiny, name):
    over = ['train.executor="sequential"']
    if name == "fedmix":  # every term of the client loss on: a confident label for every row, the KL, the pull
        over += ["algorithms.fedmix.threshold=0.0", "algorithms.fedmix.lambda_c=1.0", "algorithms.fedmix.lambda_2=1e4",
                 'algorithms.fedmix.pull="mean"']
    if name == "fedmatch_lc":
        over += ['data.partition="dirichlet"', "data.alpha=1.0", "algorithms.fedmatch_lc.batch_size=32",
                 "algorithms.fedmatch_lc.lr=0.005"]
    runs = []
    for executor in ("sequential", "vmap"):
        sc, ctx, alg = setup(tiny, name, *over[1:], f'train.executor="{executor}"')
        runs.append([r.metrics for r in Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(2)])
    for a, b in zip(*runs):  # the agreement vote has no data-dependent branch, so vmap runs it
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-5), k


def test_fedmatch_thresholds_psi_only_at_evaluation(tiny):
    """Training sees the dense σ + ψ (the official decomposed layers threshold only at evaluation): with a
    threshold above every |ψ|, ψ still learns from the unlabelled loss, and the model evaluated is σ alone."""
    over = ("algorithms.fedmatch.batch_size=32", "algorithms.fedmatch.server_batch_size=50",
            "algorithms.fedmatch.l1_threshold=100.0", "algorithms.fedmatch.lambda_l1=0.0",
            "algorithms.fedmatch.lambda_l2=0.0", "algorithms.fedmatch.threshold=0.0", "algorithms.fedmatch.lambda_a=1.0")
    sc, ctx, alg = setup(tiny, "fedmatch", *over)
    psi0 = {k: v.clone() for k, v in alg.psi.items()}
    Simulation(sc.system, sc.budget, alg, seed=sc.seed).run_round()
    assert any(not torch.equal(alg.psi[k], psi0[k]) for k in psi0)  # a gradient reached ψ through the dense sum
    state = alg.global_state()
    assert all(torch.equal(state[k], alg.sigma[k]) for k in alg.keys)  # every ψ entry is under the threshold


# --------------------------------------------------------------------------- supervised only and validation


def test_server_only_round_on_the_clock(tiny):
    sc, ctx, alg = setup(tiny, "server_only", "algorithms.server_only.server_batch_size=50")
    theta0 = {k: v.clone() for k, v in alg.theta.items()}
    rec = Simulation(sc.system, sc.budget, alg, seed=sc.seed).run_round()
    # one epoch over the server's 200 labels at 2 GHz is the whole round: no device, no bit, no joule
    assert rec.server_before_s == pytest.approx(200 * 3e6 / 2e9)
    assert rec.end_time_s == pytest.approx(rec.server_before_s)
    assert rec.bits_up == rec.bits_down == 0 and not rec.devices and rec.cum_energy_j == 0
    assert any(not torch.equal(alg.theta[k], theta0[k]) for k in theta0)
    assert 0 <= rec.metrics["accuracy"] <= 1 and rec.metrics["train_loss"] > 0
    with pytest.raises(ValueError, match="labelled set at the server"):
        setup(tiny, "server_only", 'data.partition="iid"')


def test_fedmix_supervised_only_equals_server_only(tiny):
    """FedMix with (α, β, γ) = (0, 1, 0) is θ ← σ: the server-only run's accuracy, round by round."""
    sc, ctx, alg = setup(tiny, "fedmix", "algorithms.fedmix.alpha=0.0", "algorithms.fedmix.beta=1.0",
                         "algorithms.fedmix.gamma=0.0", 'algorithms.fedmix.server_views="clean"')  # server_only's rows
    mixed = [r.metrics["accuracy"] for r in Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(2)]
    sc, ctx, ref = setup(tiny, "server_only", "algorithms.server_only.server_batch_size=50")
    alone = [r.metrics["accuracy"] for r in Simulation(sc.system, sc.budget, ref, seed=sc.seed).run(2)]
    assert mixed == alone


def test_hold_out_balanced_by_hand():
    from edgesim.learning.data.partitions import hold_out_balanced

    y = np.array([0, 1, 2] * 10)
    idx = np.arange(0, 30, 1)[::2]  # 15 indices: classes 0, 2, 1, 0, 2, 1, ... five of each
    kept, held = hold_out_balanced(idx, y, 6, np.random.default_rng(0))
    assert len(held) == 6 and np.bincount(y[held], minlength=3).tolist() == [2, 2, 2]
    assert sorted(np.concatenate([kept, held]).tolist()) == idx.tolist() and not set(kept) & set(held)
    assert len(hold_out_balanced(idx, y, 0, np.random.default_rng(0))[1]) == 0  # limiting case
    with pytest.raises(ValueError, match="some must be kept"):
        hold_out_balanced(idx, y, 15, np.random.default_rng(0))


def test_server_validation_is_held_out_and_reported(tiny):
    sc, ctx, alg = setup(tiny, "fedmix", "data.server_validation=50")
    assert ctx.server_x.shape[0] == 150 and ctx.val_x.shape[0] == 50
    assert np.bincount(ctx.val_y.cpu().numpy(), minlength=10).tolist() == [5] * 10
    rows = {tuple(r) for r in ctx.server_x.flatten(1).tolist()}
    assert not rows & {tuple(r) for r in ctx.val_x.flatten(1).tolist()}  # disjoint from the training labels
    rec = Simulation(sc.system, sc.budget, alg, seed=sc.seed).run_round()
    assert 0 <= rec.metrics["val_accuracy"] <= 1
    _, plain, _ = setup(tiny, "fedmix")
    assert plain.val_x is None and plain.server_x.shape[0] == 200
    with pytest.raises(ValueError, match="server_validation"):
        setup(tiny, "fedmix", "data.server_validation=200")
    with pytest.raises(ValueError, match="server_validation"):
        setup(tiny, "fedmix", 'data.partition="iid"', "data.server_validation=10")


# --------------------------------------------------------------------------- a server phase the deadline cuts


def _model(alg):
    """The model the algorithm evaluates: FedMatch's σ + ψ, the others' θ."""
    return {k: v.clone() for k, v in (alg.global_state() if hasattr(alg, "psi") else alg.theta).items()}


@pytest.mark.parametrize("name", ["server_only", "fedmatch", "fedmix"])
def test_a_cut_server_phase_yields_nothing(tiny, name):
    """The server's 0.3 s phase (200 labels · 3e6 cycles at 2 GHz) under a 0.2 s deadline: the clock cuts it and
    broadcasts nothing, so the model stays the previous round's (here the initial one) while the uncut run's
    (deadline 5 s) learns."""
    over = ("algorithms.server_only.server_batch_size=50",) if name == "server_only" else ()
    sc, ctx, cut = setup(tiny, name, *over, 'budget.round_mode="deadline"', "budget.deadline_s=0.2")
    start = _model(cut)
    records = Simulation(sc.system, sc.budget, cut, seed=sc.seed).run(2)
    assert [r.server_before_s for r in records] == [0.2, 0.2] and not any(r.arrived for r in records)
    assert all(torch.equal(v, start[k]) for k, v in _model(cut).items())
    assert records[0].metrics["accuracy"] == records[1].metrics["accuracy"]
    assert np.isnan(records[0].metrics["train_loss"])
    assert records[0].metrics["server_steps"] == records[0].metrics["local_steps"] == 0
    if name == "fedmix":
        assert all(torch.equal(v, cut.sigma[k]) for k, v in start.items() if k in cut.sigma) and cut.counts.sum() == 0

    sc, ctx, uncut = setup(tiny, name, *over, 'budget.round_mode="deadline"', "budget.deadline_s=5.0")
    kept = Simulation(sc.system, sc.budget, uncut, seed=sc.seed).run(2)
    assert kept[0].server_before_s == pytest.approx(0.3) and kept[0].arrived or name == "server_only"
    assert any(not torch.equal(v, start[k]) for k, v in _model(uncut).items())
    if name != "fedmatch":  # one epoch over the server's 200 labels in batches of 50
        assert kept[0].metrics["server_steps"] == 4
    assert [r.metrics["accuracy"] for r in kept] != [r.metrics["accuracy"] for r in records]


@pytest.mark.parametrize("name", ["server_only", "fedmatch", "fedmix"])
def test_a_cut_round_after_a_normal_one_keeps_that_rounds_model(tiny, name):
    """Round 0 runs; round 1's outcome says the server phase was cut: the model after round 1 is round 0's."""
    from edgesim.backend import RoundOutcome

    over = ("algorithms.server_only.server_batch_size=50",) if name == "server_only" else ()
    sc, ctx, alg = setup(tiny, name, *over)
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    sim.run_round()
    after0 = _model(alg)
    plan = alg.plan_round(sim.system_view())
    devices = tuple(w.device for w in plan.work)
    alg.complete_round(RoundOutcome(1, 1.0, 1.2, arrived=(), dropped=devices, compute_end_s={}, upload_end_s={},
                                    server_cut=True))
    assert all(torch.equal(v, after0[k]) for k, v in _model(alg).items())


class _LabellerNet(_FakeNet):
    """A fake net whose frozen labeller's logits differ from ψ's (issue 54.3)."""

    def __init__(self, logits, labeller_logits, params, fixed):
        super().__init__(logits, params, fixed)
        self._lab = labeller_logits
        self.labeller_params = None

    def logits_frozen_stats(self, b, key, params):
        self.labeller_params = params
        return self._lab[key]


def test_fedmix_labels_with_the_frozen_start_model_and_the_summed_pull_acts():
    import math

    from edgesim.learning.algorithms.fedmix.algorithm import LABELLER

    # ψ's own views say class 1 (confidently); θ^t's views say class 0 at 0.8: θ^t labels, so CE(0, (0.5, 0.5))
    psi_views = {"u_a0": torch.log(torch.tensor([[0.1, 0.9]])), "u_a1": torch.log(torch.tensor([[0.1, 0.9]])),
                 "u_pi": torch.log(torch.tensor([[0.5, 0.5]]))}
    theta_views = {"u_a0": torch.log(torch.tensor([[0.9, 0.1]])), "u_a1": torch.log(torch.tensor([[0.7, 0.3]]))}
    params = {"w": torch.tensor([1.0, 3.0])}
    fixed = {ANCHOR + "w": torch.tensor([0.0, 1.0]), LABELLER + "w": torch.tensor([7.0, 7.0])}
    net = _LabellerNet(psi_views, theta_views, params, fixed)
    cfg = FedMixConfig(lambda_1=1.0, lambda_2=0.1, n_views=2, threshold=0.75)  # defaults: theta, sum
    assert (cfg.labeller, cfg.pull, cfg.server_views) == ("theta", "sum", "weak")
    total, aux = client_loss(cfg)(net, _FakeBatch(), None)
    assert float(aux["loss_u"]) == pytest.approx(math.log(2), rel=1e-5)  # the confident label is θ^t's class 0
    assert net.labeller_params["w"].tolist() == [7.0, 7.0]  # the frozen labeller's parameters, not ψ's
    assert float(aux["pull"]) == pytest.approx(5.0)  # Σ (1 + 4): stiffness 2λ₂ per entry, not 2λ₂/P
    assert float(total) == pytest.approx(math.log(2) + 0.1 * 5.0, rel=1e-5)
    with pytest.raises(ValueError, match="send_sigma"):
        FedMixConfig(labeller="sigma")
    assert FedMixConfig(labeller="sigma", send_sigma=True).labeller == "sigma"
