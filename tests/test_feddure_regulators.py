"""FedDure's regulators as the paper specifies them (issue 54.2): the AUC of F-reg's weights against pseudo-label
correctness by hand, F-reg's input attached in Eqs. (2, 4), and one rate for η, η_s and η_w."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad

from edgesim.learning.algorithms.feddure.algorithm import (
    finish_auc,
    freg_apply,
    freg_init,
    weight_auc_aux,
    weighted_mean,
)
from edgesim.learning.algorithms.feddure.config import FedDureConfig
from edgesim.learning.label_quality import TRUTH
from edgesim.learning.tasks import Batch


def _batch(truth, mask):
    n = len(truth)
    return Batch({"u": torch.zeros(n, 1), TRUTH: torch.tensor(truth), "__mask:unl": torch.tensor(mask)},
                 {"u": "unl", TRUTH: "unl"}, {"u": 0, TRUTH: 0}, padded=True)


def test_weight_auc_by_hand():
    # pseudo-labels ŷ = 0 for all rows; rows 0, 2 right (truth 0), rows 1, 3 wrong; row 4 is padding
    b = _batch([0, 1, 0, 1, 0], [1.0, 1.0, 1.0, 1.0, 0.0])
    y_hat = torch.zeros(5, dtype=torch.long)
    m = torch.tensor([0.9, 0.2, 0.4, 0.4, 0.0])
    aux = weight_auc_aux(b, m, y_hat, "u")
    # right {0.9, 0.4} vs wrong {0.2, 0.4}: pairs (0.9>0.2) 1, (0.9>0.4) 1, (0.4>0.2) 1, (0.4=0.4) ½ → 3.5 of 4
    assert float(aux["auc_above"]) * 25 == pytest.approx(3.5) and float(aux["auc_pairs"]) * 25 == pytest.approx(4.0)
    assert finish_auc({k: float(v) for k, v in aux.items()}) == {"freg_auc": pytest.approx(0.875)}
    # limiting cases: a constant weight does not separate (0.5); weights that order right above wrong give 1
    flat = weight_auc_aux(b, torch.full((5,), 0.5), y_hat, "u")
    assert float(flat["auc_above"] / flat["auc_pairs"]) == pytest.approx(0.5)
    perfect = weight_auc_aux(b, torch.tensor([0.9, 0.1, 0.8, 0.2, 0.95]), y_hat, "u")
    assert float(perfect["auc_above"] / perfect["auc_pairs"]) == pytest.approx(1.0)
    # property: reversing the order gives 1 − AUC
    rev = weight_auc_aux(b, 1.0 - m, y_hat, "u")
    assert float(rev["auc_above"] / rev["auc_pairs"]) == pytest.approx(1.0 - 0.875)
    # no wrong row (or no truth): no AUC
    assert finish_auc({"auc_above": 0.0, "auc_pairs": 0.0}) == {}
    plain = Batch({"u": torch.zeros(2, 1), "__mask:unl": torch.ones(2)}, {"u": "unl"}, {"u": 0}, padded=False)
    assert weight_auc_aux(plain, torch.ones(2), torch.zeros(2, dtype=torch.long), "u") == {}


def test_freg_input_attached_adds_the_dH_dphi_path():
    """Eq. (4) differentiates E_u[H(w; φ)·CE(ŷ, f(T_s u; φ))] w.r.t. φ with H = f_w(f_d(T_s u; φ); w): attached, the
    gradient is the detached one plus E_u[CE·∂H/∂φ]."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, generator=g)
    phi = {"W": torch.randn(4, 3, generator=g)}
    w = freg_init(4, 8, g, "mlp_relu")
    y_hat = torch.tensor([0, 1, 2, 3, 0, 1])
    mask = torch.ones(6)

    def loss(attached):
        def f(q):
            out = x @ q["W"].T
            ce = F.cross_entropy(out, y_hat, reduction="none")
            p = F.softmax(out if attached else out.detach(), -1)
            return weighted_mean(freg_apply(w, p), ce, mask, "mean")
        return f

    def h_path(q):  # E_u[CE(detached)·H(φ)]: the term attached adds
        out = x @ q["W"].T
        ce = F.cross_entropy(out.detach(), y_hat, reduction="none")
        return weighted_mean(freg_apply(w, F.softmax(out, -1)), ce, mask, "mean")

    a, d, h = grad(loss(True))(phi)["W"], grad(loss(False))(phi)["W"], grad(h_path)(phi)["W"]
    assert torch.allclose(a, d + h, atol=1e-6)
    assert float(h.abs().max()) > 1e-6  # the path is not trivially zero


def test_one_rate_for_eta_eta_s_eta_w_unless_set():
    cfg = FedDureConfig(lr=2e-3)
    assert cfg.eta_s == cfg.eta_w == 2e-3  # §4.1: one rate for η_s, η and η_w
    own = FedDureConfig(lr=2e-3, creg_lr=1e-3, freg_lr=5e-4)
    assert (own.eta_s, own.eta_w) == (1e-3, 5e-4)
    assert FedDureConfig().freg_form == "mlp_relu" and FedDureConfig().freg_input == "attached"
    with pytest.raises(ValueError, match="freg_input"):
        FedDureConfig(freg_input="half")
    with pytest.raises(ValueError, match="creg_lr"):
        FedDureConfig(creg_lr=-1.0)
