"""Batch losses of local training, as functions any algorithm can hand to the executor.

Each ``*_loss`` builder returns ``loss(net, batch, key) -> (loss, aux)`` for a
:class:`edgesim.learning.tasks.LocalTask` (batch keys in brackets):

- :func:`cross_entropy_loss` — supervised: mean CE on labelled data
  (``x_aug`` or ``x``, ``y``; optional per-sample weights ``w``).
- :func:`supervised_loss` — the same with any per-sample loss and an optional
  penalty: ``(1/|b|) Σ ω_i ℓ(f(x_i), y_i) + penalty(w, w_start)``.
- :func:`scaled_cross_entropy_loss` — ``λ·CE`` on ``x``, ``y`` (a server's
  supervised step with a loss weight, FedMix's Eq. 6).
- :func:`fixmatch_loss` — FixMatch (Sohn et al., NeurIPS 2020, Eqs. 2–4):
  ``ℓ_s + λ_u·(1/μB) Σ_b 1[max q_b ≥ τ]·CE(argmax q_b, f(A(u_b)))`` with
  ``q_b = softmax(f(α(u_b)))`` on the weak view α (no gradient) and A the
  strong view; labelled, weak and strong rows go through one joint forward
  pass (as FixMatch's reference code does, so BatchNorm sees one batch).
- :func:`uda_loss` — UDA (Xie et al., NeurIPS 2020, Eq. 1 with confidence
  masking and sharpening, §3.2): ``ℓ_s + λ_t·(1/μB) Σ_b 1[max p_b ≥ β]·
  KL(sharpen(p_b, T) ‖ softmax(f(A(u_b))))``, ``p_b`` on the weak view, λ
  ramped linearly from 0 to ``lambda_max`` over ``ramp_steps`` local steps
  (FedDure's setting: T = 1, β = 0.6, λ → 8 over 20 steps; see docs).
- :func:`soft_target_loss` — ``KL(ŷ ‖ softmax(f(x)))`` to soft targets
  (``x``, ``q``), UM-pFSSL's pseudo-labelled step and distillation.

The FixMatch and UDA losses also report the accuracy of their pseudo-labels
when the unlabelled stream carries the hidden true labels
(``edgesim.learning.label_quality``; measurement only, no gradient, no draw).

All losses are masked means over the real rows of their streams
(``Batch.mean``), so padded rows of a vectorised step count for nothing and
the sequential and vectorised executors agree.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F

from edgesim.learning.label_quality import batch_label_aux
from edgesim.learning.state import Params

SampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Penalty = Callable[[Params, Params], torch.Tensor]


def kl_to_soft(logits: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Per-row ``KL(q ‖ softmax(logits)) = Σ_c q_c (log q_c − log p_c)`` (0·log 0 = 0), in nats."""
    logp = F.log_softmax(logits, dim=-1)
    return (q * (torch.log(q.clamp_min(1e-30)) - logp)).sum(-1)


def sharpen(p: torch.Tensor, temperature: float) -> torch.Tensor:
    """``p^(1/T) / Σ p^(1/T)`` along the last dimension (T = 1: unchanged)."""
    if not temperature > 0:
        raise ValueError(f"temperature(={temperature}) must be > 0")
    if temperature == 1.0:
        return p
    z = p.clamp_min(1e-30).log() / temperature
    return F.softmax(z, dim=-1)


def cross_entropy_per_sample(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy; ``target`` is class indices ``(B,)`` or probabilities ``(B, C)``."""
    return F.cross_entropy(output, target, reduction="none")


def supervised_loss(x_key: str = "x", sample_loss: SampleLoss = cross_entropy_per_sample,
                    penalty: Optional[Penalty] = None):
    """``(1/|b|) Σ ω_i ℓ(f(x_i), y_i) + penalty(w, w_start)`` on batch keys ``x_key`` → ``y``, weights ``w`` if present.

    ``sample_loss(output, target) -> (B,)``: one loss per sample (else ``ValueError``); the data term is
    their masked mean over the real rows (``Batch.mean``). ``penalty(params, start) -> scalar`` on the
    trainable parameters and their values at the start of local training. Both pure torch (no ``.item()``,
    no branches on values), so that vmap can run them. Aux ``loss``: the data term alone.
    """

    def loss(net, batch, key):
        (out,) = net.logits(batch, x_key)
        per = sample_loss(out, batch["y"])
        if per.shape != batch[x_key].shape[:1]:
            raise ValueError(f"sample_loss must return one loss per sample, shape ({batch[x_key].shape[0]},); "
                             f"got {tuple(per.shape)}")
        if "w" in batch:
            per = per * batch["w"]
        data = batch.mean(per, x_key)
        total = data if penalty is None else data + penalty(net.params, net.start)
        return total, {"loss": data}

    return loss


def cross_entropy_loss(x_key: str = "x"):
    """Supervised mean cross-entropy on ``x_key`` → ``y`` (weights ``w`` when the batch has them)."""
    return supervised_loss(x_key)


def scaled_cross_entropy_loss(weight: float, x_key: str = "x"):
    """``weight · mean CE(y, f(x))`` (the labels-at-server methods' server step, FedMix's Eq. 6); aux ``loss``."""

    def loss(net, b, key):
        (out,) = net.logits(b, x_key)
        value = weight * b.mean(F.cross_entropy(out, b["y"], reduction="none"), x_key)
        return value, {"loss": value}

    return loss


def fixmatch_loss(threshold: float = 0.95, lambda_u: float = 1.0, x_key: str = "x_aug"):
    """FixMatch's loss (module docstring); aux: ``loss_x``, ``loss_u``, ``mask_rate``."""

    def loss(net, b, key):
        lx, lw, ls = net.logits(b, x_key, "u_weak", "u_strong")
        sup = b.mean(F.cross_entropy(lx, b["y"], reduction="none"), x_key)
        q = F.softmax(lw.detach(), dim=-1)
        conf, pseudo = q.max(dim=-1)
        mask = (conf >= threshold).to(ls.dtype)
        unsup = b.mean(mask * F.cross_entropy(ls, pseudo, reduction="none"), "u_strong")
        total = sup + lambda_u * unsup
        return total, {"loss": total, "loss_x": sup, "loss_u": unsup, "mask_rate": b.mean(mask, "u_strong"),
                       **batch_label_aux(b, pseudo, mask, "u_strong")}

    return loss


def uda_loss(threshold: float = 0.6, temperature: float = 1.0, lambda_max: float = 8.0, ramp_steps: int = 20,
             x_key: str = "x_aug"):
    """UDA's loss (module docstring); aux: ``loss_x``, ``loss_u``, ``mask_rate``."""

    def loss(net, b, key):
        lx, lw, ls = net.logits(b, x_key, "u_weak", "u_strong")
        sup = b.mean(F.cross_entropy(lx, b["y"], reduction="none"), x_key)
        p = F.softmax(lw.detach(), dim=-1)
        mask = (p.max(dim=-1).values >= threshold).to(ls.dtype)
        unsup = b.mean(mask * kl_to_soft(ls, sharpen(p, temperature)), "u_strong")
        lam = lambda_max * min(1.0, (b.step + 1) / ramp_steps)
        total = sup + lam * unsup
        return total, {"loss": total, "loss_x": sup, "loss_u": unsup, "mask_rate": b.mean(mask, "u_strong"),
                       **batch_label_aux(b, p.argmax(-1), mask, "u_strong")}

    return loss


def soft_target_loss(x_key: str = "x", q_key: str = "q"):
    """Mean ``KL(q ‖ softmax(f(x)))`` over the batch (soft pseudo-labels or a teacher's outputs)."""

    def loss(net, b, key):
        (out,) = net.logits(b, x_key)
        value = b.mean(kl_to_soft(out, b[q_key]), x_key)
        return value, {"loss": value}

    return loss
