"""FedDure (Bai et al., AAAI 2024, arXiv 2307.05358): dual regulators on the local update (docs/studies/feddure.md).

Roles: θ the local model (downloaded, trained, uploaded); φ the coarse
regulator C-reg, the same network, re-initialised from the global model at
the start of every round (Alg. 1, line 12); w the fine regulator F-reg on a
softmax output vector, created once per device and kept there (Alg. 1,
line 2; never uploaded): the paper's "MLP ... with one fully connected layer
with 128 filters and a Sigmoid" (§4.1), read as
``Linear(C,128)-ReLU-Linear(128,1)-Sigmoid`` (``freg_form = "mlp_relu"``, the
default: the release's ``WNet`` shape with the paper's width, one per-sample
output), or ``mean_k σ(W p + b)_k`` over its 128 units (``"fc_sigmoid"``, the
earlier reading, whose mean of 128 sigmoids pins the weight near 0.5).

Per minibatch (labelled x, y; unlabelled u; weak view T_w, strong view T_s;
Alg. 1, lines 15–22):

1. pseudo-labels ``ŷ = argmax f(T_w u; θ)`` (Eq. 1, hard, no threshold);
2. virtual C-reg step ``φ⁻(w) = φ − η_s ∇_φ E_u[H(w; φ)·CE(ŷ, f(T_s u; φ))]``,
   ``H(w; φ) = f_w(softmax f(T_s u; φ); w)`` (Eq. 4), the graph kept so φ⁻
   is a function of w;
3. F-reg step on the hyper-gradient ``∇_w CE(y, f(x; φ⁻(w)))`` (Eq. 5);
4. instance weights ``m_i = f_w(softmax f(T_s u_i; θ); w⁺)`` (Eq. 6, constants);
5. C-reg step with the updated F-reg (Eq. 2);
6. feedback ``d = CE(y, f(x; φ)) − CE(y, f(x; φ⁺))`` on the labelled batch
   (Eq. 3; ``feedback_sign = "flipped"`` takes −d, the sign of the official code's MPL term;
   the official code's whole algorithm is the variant ``feddure_code``);
7. local update ``θ ← θ − η(g_s + g_u + g_d)`` (Eq. 10) with
   ``g_u = ∇ E_u[m·CE(ŷ, f(T_s u; θ))]`` (Eq. 7), ``g_d = d·∇ E_u CE(ŷ,
   f(T_s u; θ))`` (Eq. 8), ``g_s = ∇ CE(y, f(x; θ))`` (Eq. 9).

The steps of 3, 5 and 7 use the task's optimizer (Adam; one rate for η, η_s,
η_w unless ``creg_lr``/``freg_lr`` are set, §4.1); the virtual step of 2 is
Eq. (4)'s plain gradient step with η_s (Adam on w makes the hyper-gradient's
scale, ∝ η_s, irrelevant up to its ε). F-reg's input in steps 2 and 5 is the
softmax of φ's output, attached (``freg_input``): Eqs. (2, 4) differentiate
H(w; φ) through φ. Per round: ``freg_auc`` (the AUC of m against pseudo-label
correctness, :func:`weight_auc_aux`) and ``feedback_abs`` (mean |d|). E_u is the
mean over the unlabelled batch (``weight_norm = "mean"``, Eq. 7) or Σm-
normalised (``"sum"``, the official code). The ablations of Table 2:
``creg = false`` — no φ, no g_d; F-reg's virtual step is taken on θ;
``freg = false`` — m is FixMatch's fixed threshold ``1[max softmax f(T_w u; θ)
≥ τ]`` (in Eq. 2 too), no virtual step, no F-reg.

Server: FedAvg of the arrived local models (the whole state, BatchNorm
statistics included) weighted by |D_s| + |D_u| (Alg. 1, line 7). Bits: the
model down and up; φ and w never leave the device. Cycles: every forward and
backward pass of the step (:func:`phase_passes`, ``edgesim.learning.costs``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import torch
import torch.nn.functional as F
from torch.func import grad, vjp

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.learning.aggregation import weighted_average
from edgesim.learning.algorithms import register_variants
from edgesim.learning.algorithms.common import (
    arrived_updates,
    clone_state,
    round_metrics,
    sample_clients,
    to_cpu,
    to_device,
    train_devices,
    training_plan,
)
from edgesim.learning.algorithms.feddure.config import FREG_FORMS, NORMS, SIGNS, VARIANTS, FedDureConfig  # noqa: F401 - re-exported
from edgesim.learning.compression import transfers_for
from edgesim.learning.context import Context
from edgesim.learning.costs import task_cycles, training_passes
from edgesim.learning.label_quality import TRUTH, batch_label_aux
from edgesim.learning.optim import make_optimizer
from edgesim.learning.tasks import Batch, LocalTask, Net, StepInputs, Stream, View

C_REG = "creg:"  # prefix of C-reg φ's keys in a client's state
F_REG = ("freg:w1", "freg:b1", "freg:w2", "freg:b2")  # F-reg w's keys in a client's state ("mlp_relu")
FREG_KEYS = {"fc_sigmoid": F_REG[:2], "mlp_relu": F_REG}  # the keys of each F-reg form


# --------------------------------------------------------------------------- formulas


def freg_init(n_classes: int, hidden: int, generator: torch.Generator, form: str = "fc_sigmoid") -> dict[str, torch.Tensor]:
    """F-reg's parameters (``FREG_KEYS[form]``) as ``nn.Linear``'s default: every weight and bias
    ~ U(−1/√fan_in, 1/√fan_in); the first layer's draws are the same in both forms."""
    shapes = {F_REG[0]: (hidden, n_classes), F_REG[1]: (hidden,), F_REG[2]: (1, hidden), F_REG[3]: (1,)}
    fan_in = {F_REG[0]: n_classes, F_REG[1]: n_classes, F_REG[2]: hidden, F_REG[3]: hidden}
    return {k: (torch.rand(shapes[k], generator=generator) * 2.0 - 1.0) / math.sqrt(fan_in[k]) for k in FREG_KEYS[form]}


def freg_apply(w: Mapping[str, torch.Tensor], probs: torch.Tensor) -> torch.Tensor:
    """F-reg: one weight in (0, 1) per row of ``probs`` (N, C) → (N,). With ``w`` of the ``"fc_sigmoid"`` form
    ``f_w(p; w) = (1/H) Σ_k σ(W1·p + b1)_k`` (one FC layer of H units and a sigmoid, averaged to one weight);
    of the ``"mlp_relu"`` form ``σ(W2·relu(W1·p + b1) + b2)``."""
    z = F.linear(probs, w[F_REG[0]], w[F_REG[1]])
    if F_REG[2] not in w:
        return torch.sigmoid(z).mean(-1)
    return torch.sigmoid(F.linear(F.relu(z), w[F_REG[2]], w[F_REG[3]])).squeeze(-1)


def weighted_mean(weights: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, norm: str) -> torch.Tensor:
    """Eq. (7)'s ``E_u[m·ℓ]`` over the real rows (``mask`` 1/0): ``Σ mask·m·ℓ / n`` (``"mean"``, n real rows)
    or ``Σ mask·m·ℓ / Σ mask·m`` (``"sum"``, the official code; 0 when every weight is 0)."""
    num = (mask * weights * values).sum()
    den = mask.sum() if norm == "mean" else (mask * weights).sum()
    return num / den.clamp(min=1e-12)


def feedback(loss_before: torch.Tensor, loss_after: torch.Tensor, sign: str = "paper") -> torch.Tensor:
    """Eq. (3): ``d = ±(CE(y, f(x; φ)) − CE(y, f(x; φ⁺)))``; + (``"paper"``) or − (``"flipped"``, the sign of the
    official code's and MPL's term)."""
    return SIGNS[sign] * (loss_before - loss_after)


def virtual_step_loss(unl_loss, lab_loss, phi: Mapping[str, torch.Tensor], lr_s: float):
    """Eq. (5)'s objective as a function of the F-reg w: ``L(w) = lab_loss(φ⁻(w))`` with the virtual step of
    Eq. (4), ``φ⁻(w) = φ − η_s ∇_φ unl_loss(φ, w)``, its graph kept (``torch.func.grad`` inside), so
    ``grad(L)(w)`` is the hyper-gradient through the step (second derivatives ∂²unl_loss/∂φ∂w included)."""

    def loss(w):
        g = grad(unl_loss)(phi, w)
        return lab_loss({k: phi[k] - lr_s * g[k] for k in phi})

    return loss


AUC_ABOVE, AUC_PAIRS = "auc_above", "auc_pairs"


def weight_auc_aux(b, m: torch.Tensor, y_hat: torch.Tensor, key: str) -> dict[str, torch.Tensor]:
    """The tallies of the AUC of the weights ``m`` against pseudo-label correctness, over the batch's real rows.

    With r_i = [ŷ_i = y_i] and real-row mask a_i: ``auc_above`` = Σ_ij a_i r_i a_j (1 − r_j)·([m_i > m_j] +
    ½[m_i = m_j]) / n² and ``auc_pairs`` = Σ_i a_i r_i · Σ_j a_j (1 − r_j) / n² (n rows); the round's
    ``freg_auc`` = mean(auc_above) / mean(auc_pairs) (:func:`finish_auc`): the chance a right pseudo-label
    weighs more than a wrong one (0.5: no separation; Hanley & McNeil 1982). ``{}`` without the true labels.
    Measurement only (the hidden labels are never trained on)."""
    if TRUTH not in b:
        return {}
    a = b.mask(key).to(m.dtype)
    right = (y_hat == b[TRUTH]).to(m.dtype) * a
    wrong = (1.0 - (y_hat == b[TRUTH]).to(m.dtype)) * a
    diff = m.detach().unsqueeze(1) - m.detach().unsqueeze(0)  # m_i − m_j
    order = (diff > 0).to(m.dtype) + 0.5 * (diff == 0).to(m.dtype)
    n2 = float(m.shape[0] ** 2)
    return {AUC_ABOVE: (right.unsqueeze(1) * wrong.unsqueeze(0) * order).sum() / n2,
            AUC_PAIRS: right.sum() * wrong.sum() / n2}


def finish_auc(metrics: dict[str, float]) -> dict[str, float]:
    """``auc_above``/``auc_pairs`` (device means) → ``freg_auc`` (left out when no pair was right-and-wrong)."""
    above, pairs = metrics.pop(AUC_ABOVE, None), metrics.pop(AUC_PAIRS, None)
    if above is not None and pairs:
        metrics["freg_auc"] = above / pairs
    return metrics


def phase_passes(creg: bool = True, freg: bool = True) -> tuple[tuple[str, str, int, int], ...]:
    """The passes of one FedDure step: ``(phase, stream, forwards, backwards)`` per row of the stream.

    ``"lab"`` rows are the labelled batch, ``"unl"`` the unlabelled batch.
    θ's one joint forward over (x, T_w u, T_s u) serves the pseudo-labels
    (Eq. 1), the instance weights (Eq. 6) and the local update; its backward
    runs over all its rows (as FixMatch's). Differentiating through the
    virtual step (the hyper-gradient of Eq. 5) is counted as one more
    forward + backward over the unlabelled rows (a Hessian-vector product
    costs about one gradient, Pearlmutter 1994). F-reg's MLP
    (C·128 + 128 multiply-adds per row) is not counted.
    """
    out = []
    if freg:
        out += [("virtual step (Eq. 4)", "unl", 1, 1),
                ("F-reg update (Eq. 5): loss at φ⁻", "lab", 1, 1),
                ("F-reg update (Eq. 5): through the virtual step", "unl", 1, 1)]
    if creg:
        out += [("C-reg step (Eq. 2)", "unl", 1, 1),
                ("feedback d (Eq. 3): CE at φ and φ⁺", "lab", 2, 0)]
    out += [("local update (Eqs. 1, 6, 10): labelled rows", "lab", 1, 1),
            ("local update (Eqs. 1, 6, 10): weak + strong rows", "unl", 2, 2)]
    return tuple(out)


def step_passes(creg: bool = True, freg: bool = True) -> dict[str, float]:
    """Training passes per row of each stream in one step: Σ over :func:`phase_passes` of (f + 2b)/3."""
    total = {"lab": 0.0, "unl": 0.0}
    for _, stream, f, b in phase_passes(creg, freg):
        total[stream] += training_passes(f, b)
    return total


# --------------------------------------------------------------------------- the client step


def _sub(state: dict, keys) -> dict:
    return {name: {k: part[k] for k in keys} for name, part in state.items()}


def feddure_step(cfg: FedDureConfig, param_keys: list[str]):
    """The client step of FedDure (module docstring) for the executor; pure torch.func, so vmap runs it."""
    theta_opt = make_optimizer(cfg.optimizer, cfg.lr)
    creg_opt = dataclasses.replace(theta_opt, lr=cfg.eta_s)
    freg_opt = dataclasses.replace(theta_opt, lr=cfg.eta_w)

    def h_input(out):  # F-reg's input, softmax of the output vector: attached (Eqs. 2, 4: ∂H/∂φ kept) or constant
        return F.softmax(out if cfg.freg_input == "attached" else out.detach(), -1)
    c_keys = [C_REG + k for k in param_keys]
    w_keys = FREG_KEYS[cfg.freg_form]

    def step(inp: StepInputs):
        b: Batch = inp.batch
        net: Net = inp.net
        p = inp.params
        theta = {k: p[k] for k in param_keys}
        y, u_mask = b["y"], b.mask("u_strong")

        def fwd(params, key):  # a regulator's forward pass: the model's running statistics stay as they were
            return net.logits_frozen_stats(b, key, params)

        def ce_lab(logits):
            return b.mean(F.cross_entropy(logits, y, reduction="none"), "x_aug")

        def joint(th):  # θ's one forward over labelled, weak and strong rows (its statistics kept)
            return net.logits_and_stats(b, "x_aug", "u_weak", "u_strong", params=th)

        (lx, lw, ls), pull, stats = vjp(joint, theta, has_aux=True)
        net.restore_running_stats(stats)
        y_hat = lw.detach().argmax(-1)  # Eq. (1)
        opt_state, new = inp.opt_state, {}

        if cfg.freg:
            w = {k: p[k] for k in w_keys}
            inner = {k: p[C_REG + k] for k in param_keys} if cfg.creg else theta
            inner_lr = cfg.eta_s if cfg.creg else cfg.lr

            def unl_loss(q, w_):  # E_u[H(w; q)·CE(ŷ, f(T_s u; q))] (Eq. 4; H's input attached unless freg_input)
                out = fwd(q, "u_strong")
                ce = F.cross_entropy(out, y_hat, reduction="none")
                return weighted_mean(freg_apply(w_, h_input(out)), ce, u_mask, cfg.weight_norm)

            outer = virtual_step_loss(unl_loss, lambda q: ce_lab(fwd(q, "x_aug")), inner, inner_lr)
            w_new, w_state = freg_opt.update(w, grad(outer)(w), _sub(opt_state, w_keys), inp.step, inp.lr_scale)
            new.update(w_new)
            m = freg_apply(w_new, F.softmax(ls.detach(), -1)).detach()  # Eq. (6)
        else:
            w_state = {}
            m = (F.softmax(lw.detach(), -1).max(-1).values >= cfg.threshold).to(ls.dtype)

        d = torch.zeros((), dtype=ls.dtype, device=ls.device)
        c_state = {}
        if cfg.creg:
            phi = {k: p[C_REG + k] for k in param_keys}

            def creg_loss(q):  # Eq. (2) with the updated F-reg (or the fixed threshold)
                out = fwd(q, "u_strong")
                ce = F.cross_entropy(out, y_hat, reduction="none")
                weights = freg_apply(w_new, h_input(out)) if cfg.freg else m
                return weighted_mean(weights, ce, u_mask, cfg.weight_norm)

            phi_new, c_state = creg_opt.update({C_REG + k: v for k, v in phi.items()},
                                               {C_REG + k: v for k, v in grad(creg_loss)(phi).items()},
                                               _sub(opt_state, c_keys), inp.step, inp.lr_scale)
            new.update(phi_new)
            after = {k: phi_new[C_REG + k] for k in param_keys}
            d = feedback(ce_lab(fwd(phi, "x_aug")), ce_lab(fwd(after, "x_aug")), cfg.feedback_sign).detach()  # Eq. (3)

        def theta_loss(lx_, ls_):  # Eq. (10) as one loss of θ's logits: g_s + g_u + g_d
            sup = ce_lab(lx_)
            ce_u = F.cross_entropy(ls_, y_hat, reduction="none")
            unsup = weighted_mean(m, ce_u, u_mask, cfg.weight_norm)
            total = sup + unsup + d * b.mean(ce_u, "u_strong")
            return total, (total, sup, unsup)

        (g_x, g_s), (total, sup, unsup) = grad(theta_loss, argnums=(0, 1), has_aux=True)(lx, ls)
        (g_theta,) = pull((g_x, torch.zeros_like(lw), g_s))
        theta_new, t_state = theta_opt.update(theta, g_theta, _sub(opt_state, param_keys), inp.step, inp.lr_scale)
        new.update(theta_new)
        state = {name: {**t_state.get(name, {}), **c_state.get(name, {}), **w_state.get(name, {})}
                 for name in opt_state}
        aux = {"loss": total.detach(), "loss_x": sup.detach(), "loss_u": unsup.detach(), "feedback": d,
               "feedback_abs": d.abs(), "weight_mean": b.mean(m, "u_strong").detach(),
               **batch_label_aux(b, y_hat, m, "u_strong"), **weight_auc_aux(b, m, y_hat, "u_strong")}
        return new, state, aux

    return step


def make_task(cfg: FedDureConfig, param_keys: list[str], epochs: int, input_shape: tuple, mean=None,
              std=None, hflip: bool = True) -> LocalTask:
    """One round of FedDure's local training: streams ``lab`` (B rows of x, y) and ``unl`` (μB rows of u), the
    weak view of x and the weak and strong views of u, θ (+ φ, + w) trainable, every pass costed."""
    from edgesim.learning.augment import make_augmentation

    weak = make_augmentation("weak", input_shape, mean, std, hflip)
    strong = make_augmentation("strong", input_shape, mean, std, hflip)
    trainable = list(param_keys)
    if cfg.creg:
        trainable += [C_REG + k for k in param_keys]
    if cfg.freg:
        trainable += list(FREG_KEYS[cfg.freg_form])
    return LocalTask(
        loss=None, step=feddure_step(cfg, param_keys), optimizer=make_optimizer(cfg.optimizer, cfg.lr), epochs=epochs,
        streams=(Stream("lab", cfg.labeled_batch), Stream("unl", cfg.unlabeled_ratio * cfg.labeled_batch)),
        views=(View("x_aug", "x", weak), View("u_weak", "u", weak), View("u_strong", "u", strong)),
        trainable=frozenset(trainable), report_stream="lab", passes=step_passes(cfg.creg, cfg.freg),
    )


# --------------------------------------------------------------------------- the backend


class FedDure:
    """FedDure as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    def __init__(self, ctx: Context, name: str, cfg: FedDureConfig):
        self.ctx, self.name, self.cfg = ctx, name, cfg
        self.param_keys = [n for n, _ in ctx.model.named_parameters()]
        self.task = make_task(cfg, self.param_keys, ctx.epochs, ctx.input_shape, ctx.data_mean, ctx.data_std,
                              ctx.hflip_preserves_labels)
        self.global_state = ctx.init_state()
        self.freg = [freg_init(ctx.n_classes, cfg.freg_hidden, ctx.generator("freg-init", d), cfg.freg_form) if cfg.freg else {}
                     for d in range(ctx.n_devices)]
        self.freg = [to_device(ctx, w) for w in self.freg]
        self.data = [{"lab": {"x": c.x_lab, "y": c.y_lab}, "unl": {"u": c.x_unl, TRUTH: c.y_unl_hidden}}  # TRUTH: scored only
                     for c in ctx.clients]
        self.sizes = [{"lab": c.x_lab.shape[0], "unl": c.x_unl.shape[0]} for c in ctx.clients]
        self.selected: tuple[int, ...] = ()
        self.transfers = transfers_for(ctx, list(self.global_state))  # θ's update up, θ down (docs/model/compression.md)

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round, view)
        cycles = {d: task_cycles(self.task, self.sizes[d], ctx.cycles_per_sample) for d in self.selected}
        t = self.transfers
        up, down = (ctx.model_bits, ctx.model_bits) if t is None else (t.up_bits, t.down_bits)
        return training_plan(self.selected, cycles, up, down)  # θ only: φ and w stay

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, sel, t = self.ctx, self.selected, self.transfers
        g, down_error = (self.global_state, None) if t is None else t.download(outcome.round_index, self.global_state)
        regs = {C_REG + k: g[k] for k in self.param_keys} if self.cfg.creg else {}  # φ ← θ_g (Alg. 1, line 12)
        starts = [{**g, **regs, **self.freg[d]} for d in sel]
        result = train_devices(ctx, self.name, outcome.round_index, sel, starts, [self.data[d] for d in sel],
                               self.task)
        models = []
        for d, state in zip(sel, result.params):
            self.freg[d] = {k: state[k] for k in F_REG if k in state}  # kept on the device, whatever the uplink did
            models.append({k: state[k] for k in g})
        extra = {}
        if t is not None:  # the server rebuilds θ from the decoded updates
            models, up_errors = t.upload(outcome.round_index, sel, [g] * len(sel), models, self.global_state)
            extra = t.metrics(up_errors, down_error)
        weights = [float(self.sizes[d]["lab"] + self.sizes[d]["unl"]) for d in sel]
        updates = arrived_updates(outcome, sel, models, weights)
        if updates and sum(w for _, w in updates) > 0:
            self.global_state = weighted_average(updates)
        metrics = round_metrics(ctx, [self.global_state] * ctx.n_devices, result, shared=self.global_state)
        return {**finish_auc(metrics), **extra}

    def state_dict(self) -> dict:
        out = {"global": to_cpu(self.global_state), "freg": [to_cpu(w) for w in self.freg]}
        if self.transfers is not None:
            out["transfers"] = self.transfers.state_dict()
        return out

    def load_state_dict(self, state: dict) -> None:
        self.global_state = to_device(self.ctx, state["global"])
        self.freg = [to_device(self.ctx, clone_state(w)) for w in state["freg"]]
        if self.transfers is not None and "transfers" in state:
            self.transfers.load_state_dict(state["transfers"])


# --------------------------------------------------------------------------- the registered variants


register_variants(VARIANTS, FedDure)
