"""``feddure_code``: FedDure as the official release runs it (White1973/FedDure @ 50ecb77; docs/studies/feddure.md).

The release's client (``groups/client_ssl/base_ssl.py``, class
``FedDureClientSSL``; "L" below are its line numbers) is a Meta Pseudo Labels
loop without the paper's F-reg, plus extras the paper does not describe. Roles:
the release's *teacher* θ is the local model (trained, uploaded, averaged:
L633, ``groups/server_ssl/base_ssl.py`` L211–225); its *student* φ is the
coarse regulator, re-set to the global model every round (L340–347). One
round of a device (``run_emsemble_train`` with ``is_teacher_warm = False``,
L383–392; the configs' ``warm_rounds: -1``):

1. **Supervised fine-tuning** (``train_label_teacher``, L891–960): F steps of
   ``CE(y, f(x; θ))`` on θ. The step's forward runs over the labelled, weak
   and strong rows at once (L932–934) though only the labelled logits enter
   the loss (L942), so BatchNorm sees that joint batch, and it is charged so.
   F = ``finetune_epochs`` epochs of the device's batches (the release's
   ``fine_tune_steps: 5``, CIFAR config L96, is one epoch of its 50 labels at
   B = 10).
2. **MPL steps** (``train_step``, L696–806), M = the round's local epochs of
   batches, each:

   - θ's joint forward over (x, T_w u, T_s u) (L738–745); ``L_s = CE(y, f(x; θ))`` (L748);
   - soft pseudo-labels ``q = softmax f(T_w u; θ)``, ``ŷ = argmax q`` (L751–752);
   - the UDA term ``L_u = mean_b 1[max q_b ≥ τ]·(−Σ_c q_bc log softmax f(T_s u_b; θ)_c)``,
     τ = 0.6 (L754–757, ``teacher_thre`` L92), weighted ``λ_u(s) = 8·min(1, (s+1)/R)``,
     R = 20 (L761, ``uda_steps`` L95), s the MPL step of the round;
   - the student on the **weak** view: ``φ⁺ = φ − η_φ ∇ CE(ŷ, f(T_w u; φ))`` (L765–773);
   - ``dot = CE(y, f(x; φ⁺)) − CE(y, f(x; φ))`` (L767, L777–782), i.e. −d of the paper's Eq. (3);
   - the MPL term ``dot·CE(ỹ, f(T_s u; θ))`` with ``ỹ = argmax f(T_s u; θ)``, the
     teacher's own strong-view argmax (L785–786);
   - θ steps on ``L_s + λ_u(s)·L_u + dot·CE(ỹ, f(T_s u; θ))`` (L762, L788–795).

3. **Learning rates** (L561–590, L963–983): θ's Adam and φ's Adam are new
   every round (L572–573; Adam without weight decay, L687 and
   ``easyfl/client/base.py`` L260); θ's rate is scaled by the release's
   ``get_cosine_schedule_with_warmup`` over its F + M steps of the round
   (warm-up ``W = 10`` steps, CIFAR config L106), φ's over its M steps with
   ``student_wait_steps = 2`` (L107) steps at 0 first:
   :func:`release_lr_factor`.

Not in the release, so not here: F-reg (``WNet`` is built only in
``BaseClientSSL.train``, L110, which ``FedDureClientSSL`` never calls).
Different from the release: the number of MPL steps (ours: the executor's
epochs of batches, as every algorithm here; the release: a fixed
``total_steps``, 5 for CIFAR), the unlabelled batch (ours: μB; the release:
``|D_u| // round(|D_s|/B)``, L323–334) and the augmentations (ours:
docs/model/augmentations.md).

Server: FedAvg of the arrived θ (whole state) weighted by |D_s| + |D_u|
(L636). Bits: the model down and up. Cycles: every pass
(:func:`step_passes`, :mod:`edgesim.learning.costs`).
"""

from __future__ import annotations

import math

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
from edgesim.learning.algorithms.feddure_code.config import VARIANTS, FedDureCodeConfig
from edgesim.learning.context import Context
from edgesim.learning.costs import task_cycles, training_passes
from edgesim.learning.label_quality import TRUTH, batch_label_aux
from edgesim.learning.optim import make_optimizer
from edgesim.learning.tasks import Batch, LocalTask, Net, StepInputs, Stream, View

STUDENT = "student:"  # prefix of the student φ's keys in a client's state


# --------------------------------------------------------------------------- formulas


def release_lr_factor(step: int, warmup_steps: int, training_steps: int, wait_steps: int = 0) -> float:
    """The release's ``get_cosine_schedule_with_warmup`` factor at ``step`` (0-based; L963–981):
    0 for ``step < wait``; ``step / (W + wait)`` for ``step < W + wait``; then
    ``max(0, ½(1 + cos(π·p)))`` with ``p = (step − W − wait) / max(1, training_steps − W − wait)``."""
    if step < wait_steps:
        return 0.0
    if step < warmup_steps + wait_steps:
        return float(step) / float(max(1, warmup_steps + wait_steps))
    progress = float(step - warmup_steps - wait_steps) / float(max(1, training_steps - warmup_steps - wait_steps))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def uda_ramp(step: int, lambda_max: float, ramp_steps: int) -> float:
    """The UDA term's weight at MPL step ``step`` (0-based): ``λ·min(1, (step + 1)/R)`` (L761)."""
    return lambda_max * min(1.0, (step + 1) / ramp_steps)


def soft_cross_entropy(logits: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Per row ``−Σ_c q_c log softmax(logits)_c`` (nats; L756, the UDA term's cross-entropy to soft targets)."""
    return -(q * F.log_softmax(logits, dim=-1)).sum(-1)


def phase_passes() -> dict[str, tuple[tuple[str, str, int, int], ...]]:
    """Per phase, the passes of one step: ``(what, stream, forwards, backwards)`` per row of the stream.

    Fine-tuning (L932–946): one joint forward and backward over the labelled,
    weak and strong rows. MPL (L741–795): θ's joint forward and backward;
    the student's forward of x before and after its step and its forward and
    backward on the weak rows.
    """
    joint = (("θ joint forward + backward: labelled rows", "lab", 1, 1),
             ("θ joint forward + backward: weak + strong rows", "unl", 2, 2))
    return {
        "finetune": joint,
        "mpl": joint + (("student CE(y, f(x; φ)) before and after its step", "lab", 2, 0),
                        ("student step on the weak rows", "unl", 1, 1)),
    }


def step_passes(finetune_epochs: int, epochs: int) -> dict[str, float]:
    """Training passes per row of each stream per step, averaged over a round's F fine-tuning and M MPL steps
    (F : M = ``finetune_epochs`` : ``epochs`` on every device): ``Σ_phase share·Σ (f + 2b)/3``."""
    total = finetune_epochs + epochs
    out = {"lab": 0.0, "unl": 0.0}
    for phase, n in (("finetune", finetune_epochs), ("mpl", epochs)):
        for _, stream, f, b in phase_passes()[phase]:
            out[stream] += (n / total if total else 0.0) * training_passes(f, b)
    return out


# --------------------------------------------------------------------------- the client step


def code_step(cfg: FedDureCodeConfig, param_keys: list[str], finetune_steps: int, mpl_steps: int):
    """The release's client step (module docstring) for a device with ``finetune_steps`` F and ``mpl_steps`` M;
    steps ``s < F`` fine-tune θ, the others are MPL steps (θ's Adam counts all F + M, φ's only its own M)."""
    theta_opt = make_optimizer(cfg.optimizer, cfg.lr)
    student_opt = make_optimizer(cfg.optimizer, cfg.student_lr)
    s_keys = [STUDENT + k for k in param_keys]

    def step(inp: StepInputs):
        b: Batch = inp.batch
        net: Net = inp.net
        p = inp.params
        s = inp.step
        theta = {k: p[k] for k in param_keys}
        y = b["y"]

        def ce_lab(logits):
            return b.mean(F.cross_entropy(logits, y, reduction="none"), "x_aug")

        def joint(th):  # θ's one forward over labelled, weak and strong rows (its statistics kept)
            return net.logits_and_stats(b, "x_aug", "u_weak", "u_strong", params=th)

        def fwd(params, key):  # the student's forward: the model's running statistics stay as they were
            return net.logits_frozen_stats(b, key, params)

        (lx, lw, ls), pull, stats = vjp(joint, theta, has_aux=True)
        net.restore_running_stats(stats)
        sup = ce_lab(lx)
        theta_scale = release_lr_factor(s, cfg.warmup_steps, mpl_steps)  # L576–578: one schedule over F + M
        opt_state = inp.opt_state
        if s < finetune_steps:  # L942: the labelled CE alone
            g_x = grad(ce_lab)(lx)
            (g_theta,) = pull((g_x, torch.zeros_like(lw), torch.zeros_like(ls)))
            theta_new, t_state = theta_opt.update(theta, g_theta, _sub(opt_state, param_keys), s, theta_scale)
            state = {name: {**part, **t_state.get(name, {})} for name, part in opt_state.items()}
            zero = torch.zeros((), dtype=ls.dtype, device=ls.device)
            aux = {"loss": sup.detach(), "loss_x": sup.detach(), "loss_u": zero, "feedback": zero, "mask_rate": zero,
                   # the teacher's labels are scored, none is trained on (used = 0)
                   **batch_label_aux(b, lw.detach().argmax(-1), torch.zeros_like(lw[:, 0]), "u_weak")}
            return {**p, **theta_new}, state, aux

        m = s - finetune_steps  # the MPL step of the round (L714)
        q = F.softmax(lw.detach(), -1)  # L751
        conf, y_hat = q.max(-1)  # L752
        mask = (conf >= cfg.uda_threshold).to(ls.dtype)  # L754

        phi = {k: p[STUDENT + k] for k in param_keys}

        def student_loss(q_):  # L766–768: CE(ŷ, f(T_w u; φ))
            return b.mean(F.cross_entropy(fwd(q_, "u_weak"), y_hat, reduction="none"), "u_weak")

        before = ce_lab(fwd(phi, "x_aug")).detach()  # L765, L767
        g_phi = {STUDENT + k: v for k, v in grad(student_loss)(phi).items()}
        student_scale = release_lr_factor(m, cfg.warmup_steps, mpl_steps, cfg.student_wait_steps)  # L579–583
        phi_new, s_state = student_opt.update({STUDENT + k: v for k, v in phi.items()}, g_phi,
                                              _sub(opt_state, s_keys), m, student_scale)
        after = ce_lab(fwd({k: phi_new[STUDENT + k] for k in param_keys}, "x_aug")).detach()  # L777–780
        dot = after - before  # L782: −d of Eq. (3)
        hard = ls.detach().argmax(-1)  # L785
        lam = uda_ramp(m, cfg.uda_lambda, cfg.uda_ramp_steps)  # L761

        def teacher_loss(lx_, ls_):  # L762, L786, L788
            sup_ = ce_lab(lx_)
            uda = b.mean(mask * soft_cross_entropy(ls_, q), "u_strong")
            mpl = dot * b.mean(F.cross_entropy(ls_, hard, reduction="none"), "u_strong")
            total_ = sup_ + lam * uda + mpl
            return total_, (total_, uda)

        (g_x, g_s), (t_loss, uda) = grad(teacher_loss, argnums=(0, 1), has_aux=True)(lx, ls)
        (g_theta,) = pull((g_x, torch.zeros_like(lw), g_s))
        theta_new, t_state = theta_opt.update(theta, g_theta, _sub(opt_state, param_keys), s, theta_scale)
        state = {name: {**t_state.get(name, {}), **s_state.get(name, {})} for name in opt_state}
        aux = {"loss": t_loss.detach(), "loss_x": sup.detach(), "loss_u": uda.detach(), "feedback": -dot,
               "mask_rate": b.mean(mask, "u_strong").detach(),
               **batch_label_aux(b, y_hat, None, "u_weak")}  # the student trains on every ŷ (L766–768)
        return {**theta_new, **phi_new}, state, aux

    return step


def _sub(state: dict, keys) -> dict:
    return {name: {k: part[k] for k in keys} for name, part in state.items()}


def steps_per_epoch(cfg: FedDureCodeConfig, sizes: dict) -> int:
    """A device's steps per epoch: its lead stream's batches, ``max(⌈n_lab/B⌉, ⌈n_unl/μB⌉)`` (the executor's)."""
    return max(math.ceil(sizes["lab"] / cfg.labeled_batch),
               math.ceil(sizes["unl"] / (cfg.unlabeled_ratio * cfg.labeled_batch)))


def make_task(cfg: FedDureCodeConfig, param_keys: list[str], epochs: int, per_epoch: int, input_shape: tuple,
              mean=None, std=None, hflip: bool = True) -> LocalTask:
    """One round of the release's local training on a device with ``per_epoch`` steps per epoch:
    ``finetune_epochs + epochs`` epochs, the first ``finetune_epochs`` of them fine-tuning."""
    from edgesim.learning.augment import make_augmentation

    weak = make_augmentation("weak", input_shape, mean, std, hflip)
    strong = make_augmentation("strong", input_shape, mean, std, hflip)
    return LocalTask(
        loss=None, step=code_step(cfg, param_keys, cfg.finetune_epochs * per_epoch, epochs * per_epoch),
        optimizer=make_optimizer(cfg.optimizer, cfg.lr), epochs=cfg.finetune_epochs + epochs,
        streams=(Stream("lab", cfg.labeled_batch), Stream("unl", cfg.unlabeled_ratio * cfg.labeled_batch)),
        views=(View("x_aug", "x", weak), View("u_weak", "u", weak), View("u_strong", "u", strong)),
        trainable=frozenset(param_keys) | frozenset(STUDENT + k for k in param_keys), report_stream="lab",
        passes=step_passes(cfg.finetune_epochs, epochs),
    )


# --------------------------------------------------------------------------- the backend


class FedDureCode:
    """``feddure_code`` as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    def __init__(self, ctx: Context, name: str, cfg: FedDureCodeConfig):
        self.ctx, self.name, self.cfg = ctx, name, cfg
        self.param_keys = [n for n, _ in ctx.model.named_parameters()]
        self.global_state = ctx.init_state()
        self.data = [{"lab": {"x": c.x_lab, "y": c.y_lab}, "unl": {"u": c.x_unl, TRUTH: c.y_unl_hidden}}  # TRUTH: scored only
                     for c in ctx.clients]
        self.sizes = [{"lab": c.x_lab.shape[0], "unl": c.x_unl.shape[0]} for c in ctx.clients]
        self.tasks: dict[int, LocalTask] = {}  # by steps per epoch: F and M are a device's, fixed per task
        self.selected: tuple[int, ...] = ()

    def task(self, d: int) -> LocalTask:
        per_epoch = steps_per_epoch(self.cfg, self.sizes[d])
        if per_epoch not in self.tasks:
            ctx = self.ctx
            self.tasks[per_epoch] = make_task(self.cfg, self.param_keys, ctx.epochs, per_epoch,
                                              ctx.input_shape, ctx.data_mean, ctx.data_std, ctx.hflip_preserves_labels)
        return self.tasks[per_epoch]

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round, view)
        cycles = {d: task_cycles(self.task(d), self.sizes[d], ctx.cycles_per_sample) for d in self.selected}
        return training_plan(self.selected, cycles, ctx.model_bits, ctx.model_bits)

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, sel, g = self.ctx, self.selected, self.global_state
        student = {STUDENT + k: g[k] for k in self.param_keys}  # φ ← θ_g every round (L340–347)
        groups: dict[int, list[int]] = {}
        for d in sel:
            groups.setdefault(id(self.task(d)), []).append(d)
        states, results = {}, []
        for devices in groups.values():  # devices of one task (same F, M) in one executor call
            r = train_devices(ctx, self.name, outcome.round_index, devices, [{**g, **student}] * len(devices),
                              [self.data[d] for d in devices], self.task(devices[0]))
            states.update({d: {k: st[k] for k in g} for d, st in zip(devices, r.params)})
            results.append((devices, r))
        result = _merge_results(sel, results)
        weights = [float(self.sizes[d]["lab"] + self.sizes[d]["unl"]) for d in sel]
        updates = arrived_updates(outcome, sel, [states[d] for d in sel], weights)
        if updates and sum(w for _, w in updates) > 0:
            self.global_state = weighted_average(updates)
        return round_metrics(ctx, [self.global_state] * ctx.n_devices, result, shared=self.global_state)

    def state_dict(self) -> dict:
        return {"global": to_cpu(self.global_state)}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = to_device(self.ctx, clone_state(state["global"]))


def _merge_results(order, results):
    """One :class:`edgesim.learning.tasks.LocalTrainResult` of the devices ``order`` from per-group results."""
    from edgesim.learning.tasks import LocalTrainResult

    by_device = {}
    names = sorted({k for _, r in results for k in r.aux})
    for devices, r in results:
        for i, d in enumerate(devices):
            by_device[d] = (r.params[i], r.mean_loss[i], r.n_steps[i], {k: r.aux.get(k, [math.nan] * len(devices))[i]
                                                                        for k in names})
    rows = [by_device[d] for d in order]
    return LocalTrainResult([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                            {k: [r[3][k] for r in rows] for k in names})


register_variants(VARIANTS, FedDureCode)
