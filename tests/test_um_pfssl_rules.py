"""UM-pFSSL's labelling options (rule, threshold), the Alg. 1-literal epoch structure, fully unlabelled devices
(``data.min_labeled``) and the two-dropout CNN: formulas on hand-sized tensors, then tiny runs."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch
from test_um_pfssl import TINY_UM

from edgesim.learning.algorithms.um_pfssl.algorithm import UMPFSSLConfig, confident, corr_weights, pseudo_labels
from edgesim.learning.data.partitions import dirichlet_partition
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import ScenarioError, load_scenario

# two helpers, two samples, two classes: A is sure of sample 0, B of sample 1
A = torch.tensor([[0.9, 0.1], [0.5, 0.5]])
B = torch.tensor([[0.6, 0.4], [0.1, 0.9]])
PROBS = torch.stack([A, B])


def test_most_certain_takes_each_samples_lowest_entropy_helper():
    assert torch.equal(pseudo_labels(PROBS, "most_certain"), torch.tensor([[0.9, 0.1], [0.1, 0.9]]))
    assert torch.equal(pseudo_labels(PROBS), pseudo_labels(PROBS, "most_certain"))  # Eq. 11 is the default


def test_mean_rule_by_hand():
    assert torch.allclose(pseudo_labels(PROBS, "mean"), torch.tensor([[0.75, 0.25], [0.3, 0.7]]))


def test_corr_weighted_rule_by_hand_and_its_limits():
    # weights 3 : 1 → sample 0: (3·0.9 + 0.6)/4 = 0.825; sample 1: (3·0.5 + 0.1)/4 = 0.4
    got = pseudo_labels(PROBS, "corr_weighted", [0.75, 0.25])
    assert torch.allclose(got, torch.tensor([[0.825, 0.175], [0.4, 0.6]]))
    assert torch.allclose(pseudo_labels(PROBS, "corr_weighted", [0.3, 0.3]), pseudo_labels(PROBS, "mean"))
    assert torch.equal(pseudo_labels(PROBS, "corr_weighted", [0.5, 0.0]), A)  # one helper weighed: its prediction


@pytest.mark.parametrize("rule", ["most_certain", "mean", "corr_weighted"])
def test_every_rule_gives_distributions(rule):
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(4, 7, 10, generator=g), -1)
    q = pseudo_labels(probs, rule, [0.1, 0.4, 0.0, 0.2])
    assert q.shape == (7, 10) and torch.allclose(q.sum(-1), torch.ones(7)) and bool((q >= 0).all())


def test_rule_errors():
    with pytest.raises(ValueError, match="one weight per helper"):
        pseudo_labels(PROBS, "corr_weighted")
    with pytest.raises(ValueError, match="not all 0"):
        pseudo_labels(PROBS, "corr_weighted", [0.0, 0.0])
    with pytest.raises(ValueError, match="expected one of"):
        pseudo_labels(PROBS, "vote")
    with pytest.raises(ValueError, match=r"must be \(M helpers"):
        pseudo_labels(A, "mean")


def test_corr_weights_clip_negatives_and_fall_back_to_equal():
    assert corr_weights([0.2, -0.1, 0.5]) == [0.2, 0.0, 0.5]
    assert corr_weights([-1.0, 0.0]) == [1.0, 1.0]


def test_confidence_threshold_mask_by_hand():
    q = torch.tensor([[0.9, 0.1], [0.6, 0.4], [0.5, 0.5]])
    assert confident(q, 0.7).tolist() == [1.0, 0.0, 0.0]
    assert confident(q, 0.6).tolist() == [1.0, 1.0, 0.0]  # max ŷ ≥ τ: the boundary is kept
    assert confident(q, None).tolist() == [1.0, 1.0, 1.0]
    assert confident(q[:0], 0.5).shape == (0,)


@pytest.mark.parametrize("key, value, expected", [
    ("label_rule", "vote", "one of 'most_certain', 'mean', 'corr_weighted'"),
    ("label_threshold", 1.5, "a confidence in (0, 1] (or unset: no threshold)"),
    ("label_threshold", 0.0, "a number > 0"),
    ("local_steps", "per_round", "one of 'per_batch', 'per_epoch'"),
])
def test_option_errors_are_one_line(key, value, expected):
    with pytest.raises(ValueError) as e:
        UMPFSSLConfig(**{key: value})
    assert str(e.value) == f"{key} = {value!r}: expected {expected}"


# --------------------------------------------------------------------------- tiny runs

# test_um_pfssl's tiny scenario, broadcast instantaneous (downlink_rate_bps = 0, the default), 3 clients a round,
# seed 2 and 3 rounds (the overrides every load below adds)
TINY = TINY_UM.format(rate=0.0, k=3)
TINY_SETS = ["seed=2", "budget.rounds=3"]


def _run(tmp_path, name, *sets):
    p = tmp_path / "tiny.toml"
    p.write_text(TINY)
    out = run_scenario(load_scenario(p, [*TINY_SETS, *sets]), tmp_path / name)
    return [r for r in csv.DictReader(open(out / "rounds.csv"))]


def test_a_threshold_no_label_misses_is_no_threshold(tmp_path):
    """τ below every confidence masks nothing: the same run, column for column (the mask only multiplies by 1)."""
    plain = _run(tmp_path, "a")
    tiny_tau = _run(tmp_path, "b", "algorithms.um_pfssl.label_threshold=1e-9")
    for p, t in zip(plain, tiny_tau):
        assert p["accuracy"] == t["accuracy"] and p["train_loss"] == t["train_loss"]
        assert p["pseudo_label_accuracy"] == t["pseudo_label_accuracy"]
    assert float(tiny_tau[-1]["mask_rate"]) == 1.0 and "mask_rate" not in plain[-1]


def test_rules_threshold_and_per_epoch_run_and_report(tmp_path):
    rows = _run(tmp_path, "r", 'algorithms.um_pfssl.label_rule="corr_weighted"', "algorithms.um_pfssl.label_threshold=0.3",
                'algorithms.um_pfssl.local_steps="per_epoch"')
    assert [int(r["round"]) for r in rows] == [0, 1, 2]
    for r in rows[1:]:
        assert 0.0 <= float(r["mask_rate"]) <= 1.0 and 0.0 <= float(r["pseudo_label_accuracy_all"]) <= 1.0
        assert math.isfinite(float(r["train_loss"]))
    assert rows[0].get("pseudo_label_accuracy", "") == "" and rows[0]["mask_rate"] == ""  # the warm-up labels nothing
    mean = _run(tmp_path, "m", 'algorithms.um_pfssl.label_rule="mean"')
    eq11 = _run(tmp_path, "e")
    assert mean[0] == eq11[0]  # the warm-up does not depend on the rule
    assert mean[-1]["pseudo_label_accuracy"] != eq11[-1]["pseudo_label_accuracy"]


def test_per_epoch_is_charged_a_ce_epoch_and_a_kl_epoch(tmp_path):
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.context import build_context

    p = tmp_path / "tiny.toml"
    p.write_text(TINY)
    sc = load_scenario(p, [*TINY_SETS, 'algorithms.um_pfssl.local_steps="per_epoch"', "workload.local_iterations=2"])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    alg = REGISTRY["um_pfssl"].build(ctx, sc.learning["algorithms"]["um_pfssl"])
    n_s, n_u = alg.sizes[0]
    # E = 2 epochs, each one pass over D^s (CE) and one over D^u (KL): 2·(n_s + n_u)·C cycles
    assert alg._train_cycles(n_s, n_u) == pytest.approx(2 * (n_s + n_u) * ctx.cycles_per_sample)


# --------------------------------------------------------------------------- fully unlabelled devices


def test_min_labeled_zero_only_changes_the_devices_round_gives_no_label():
    y_train = np.repeat(np.arange(10), 60)
    y_test = np.repeat(np.arange(10), 20)
    one = dirichlet_partition(y_train, y_test, 20, 0.5, np.random.default_rng(4), labeled_ratio_alpha=0.05)
    zero = dirichlet_partition(y_train, y_test, 20, 0.5, np.random.default_rng(4), labeled_ratio_alpha=0.05,
                               min_labeled=0)
    unlabelled = [k for k, s in enumerate(zero) if len(s.labeled) == 0]
    assert unlabelled, "Dir_2(0.05) should give some device round(mu n) = 0"
    for k, (a, b) in enumerate(zip(one, zero)):
        assert np.array_equal(np.sort(np.r_[a.labeled, a.unlabeled]), np.sort(np.r_[b.labeled, b.unlabeled]))
        assert np.array_equal(a.test, b.test)
        if k in unlabelled:
            assert len(a.labeled) == 1 and set(a.labeled) <= set(b.unlabeled)  # the forced label, now unlabelled
        else:
            assert np.array_equal(a.labeled, b.labeled)  # the same draws: nothing else moves


def test_min_labeled_is_checked(tmp_path):
    p = tmp_path / "tiny.toml"
    p.write_text(TINY)
    with pytest.raises(ScenarioError, match=r"min_labeled = -1: expected an integer >= 0"):
        load_scenario(p, [*TINY_SETS, "data.min_labeled=-1"])


def test_devices_without_labels_run_every_family(tmp_path):
    rows = _run(tmp_path, "u", "data.labeled_ratio_alpha=0.05", "data.min_labeled=0",
                'run.algorithms=["um_pfssl", "fixavg", "fedper", "pfedme", "fedavg_sl"]',
                'algorithms.fedper.objective="fixmatch"', "budget.rounds=2")
    assert {r["algorithm"] for r in rows} == {"um_pfssl", "fixavg", "fedper", "pfedme", "fedavg_sl"}
    assert all(math.isfinite(float(r["accuracy"])) for r in rows)


# --------------------------------------------------------------------------- the two-dropout CNN


def test_cnn_mc2_has_dropout_in_two_places_and_cnn_mc_is_unchanged():
    from edgesim.learning.layers import Dropout
    from edgesim.learning.models import build_model

    one, two = build_model("cnn_mc", (1, 28, 28), 10), build_model("cnn_mc2", (1, 28, 28), 10)
    assert [m.p for m in one.modules() if isinstance(m, Dropout)] == [0.5]
    assert [m.p for m in two.modules() if isinstance(m, Dropout)] == [0.25, 0.5]
    assert {k: v.shape for k, v in one.state_dict().items()} == {k: v.shape for k, v in two.state_dict().items()}
    two.load_state_dict(one.state_dict())
    x = torch.randn(4, 1, 28, 28)
    one.eval(), two.eval()
    assert torch.equal(one(x), two(x))  # dropout off: the same network
