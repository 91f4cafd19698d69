"""UM-pFSSL (Shi, Chen & Zhang, IEEE TNSE 2023; arXiv 2205.02438): helpers label each other's data (docs/studies/um_pfssl.md).

Every device k keeps a personal model w_k and a list H_k of at most M helper
models (k itself always among them) that it downloaded from the server's
model pool. How much a helper j suits k is

    Corr(k|j) = (1 − μ_k)·(1 − H̄(D_k^u | w_j)) + μ_k·Acc(D_k^s; w_j)      (arXiv Eq. 13, default)
    Corr(k|j) = (1 − μ_k) / max(H̄, 1e-8)    + μ_k·Acc(D_k^s; w_j)      (journal Eq. 13, ``corr_form``)

with μ_k = |D^s|/(|D^s| + |D^u|) (Eq. 2), H̄ the *mean* per-sample entropy
of j's MC-dropout prediction (Eqs. 9–10, T passes) over k's unlabelled data
divided by log C (Eq. 14), and Acc j's accuracy on k's labelled data (0
without labelled data). One round t ≥ 1 (round 0 is the warm-up: every
device trains ``warmup_epochs`` on its labelled data from the same w_0 and
uploads, so the pool has a model of everyone):

1. ``ReplaceHelper`` while t ≤ F: each device downloads R random models not
   in its list and keeps the best R of (its R lowest helpers ∪ the
   candidates) — a vacant slot ranks below every model;
2. ``UpdateHelper`` when t % ν = 0 (``update_rule = "from_nu"``: every
   round once t ≥ ν, as the journal's Alg. 1 writes it): each device
   re-downloads those of its helpers outside its R lowest whose server copy
   is newer than its own;
3. the K̄ sampled devices fill their lists at random up to M, set
   w_k ← Σ_j Corr(k|j)·w_j / Σ_j Corr(k|j), label each unlabelled x with the
   MC-dropout prediction of its most certain helper (soft, no threshold),
   and train E epochs, each mini-batch one cross-entropy step on labelled
   data then one KL(ŷ ‖ softmax f(x)) step on the pseudo-labelled data
   (Alg. 1, lines 22–23); then they upload w_k.

Steps 1–2 run on all K devices before the sampling (arXiv Alg. 1, lines
7–12; ``helper_devices = "all"``, default) or on the sampled ones only (the
journal's Alg. 1, whose Table 3 counts match that; ``"sampled"``).

On the clock: every helper or candidate model a device receives is
``model_bits`` of download; every Corr it evaluates is T MC-dropout forward
passes of that model over the device's labelled and unlabelled data
(``edgesim.learning.costs.forward_cycles``, phase ``"helpers"``). A device keeps
what it has evaluated (Corr and the helper's predictions on its unlabelled
data) and evaluates again only a model it has not seen; the aggregation's
M·|w| multiply-adds are not charged. A device dropped at a deadline did
nothing this round: its list, its model and the server's copy stay as they
were.

Compression (``[compression]``, docs/model/compression.md): round 0's w_0 is a
broadcast (stream ``("compress", "downlink", 0)``); every decoded model a
device holds is what it received. Each helper or candidate download is that
device's own encoding of the pool's model (stream ``("compress", "downlink",
"model", j, version + 1, k)``): it evaluates, labels with and aggregates its
decoded copies; its own model it never downloads. The upload is the device's
model as its difference from the server's copy of it (which the device
mirrors), and the pool holds what the server rebuilt. With error feedback the
device keeps its own model, so what an upload left out (its model − the
server's copy) goes with its next upload (Stich et al.'s memory); without, its
model becomes the server's copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import grad

from edgesim.backend import DeviceWork, RoundOutcome, RoundPlan, SystemView
from edgesim.config import fail
from edgesim.learning.aggregation import weighted_average
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.common import (
    NO_STEPS,
    accuracy_metrics,
    accuracy_per_device,
    due_devices,
    mean_loss,
    sample_clients,
    start_label_rates_of,
    step_metrics,
    to_cpu,
    to_device,
    train_devices,
)
from edgesim.learning.algorithms.um_pfssl.config import (  # noqa: F401 - re-exported
    FORMS,
    HELPER_DEVICES,
    LABEL_RULES,
    LOCAL_STEPS,
    UPDATE_RULES,
    UMPFSSLConfig,
)
from edgesim.learning.compression import transfers_for
from edgesim.learning.context import Context
from edgesim.learning.costs import forward_cycles, task_cycles
from edgesim.learning.inference import entropy, mc_dropout_proba
from edgesim.learning.label_quality import label_rates, round_label_metrics
from edgesim.learning.objectives import cross_entropy_loss, kl_to_soft
from edgesim.learning.phases import phase
from edgesim.learning.tasks import LocalTask, LocalTrainResult, StepInputs, Stream

# --------------------------------------------------------------------------- formulas


def labeled_share(n_labeled: int, n_unlabeled: int) -> float:
    """μ_k = |D^s| / (|D^s| + |D^u|) (Eq. 2); 0 for a device without data."""
    n = n_labeled + n_unlabeled
    return n_labeled / n if n else 0.0


def corr(mean_entropy_nats: float, accuracy: float, mu: float, n_classes: int, form: str = "arxiv") -> float:
    """Corr(k|j) (module docstring): H̄ = mean entropy / log C (nats / nats); ``accuracy`` and ``mu`` in [0, 1].

    arXiv: ``(1 − μ)(1 − H̄) + μ·Acc`` ∈ [0, 1]; journal: ``(1 − μ)/max(H̄, 1e-8) + μ·Acc``.
    A device without unlabelled data has μ = 1 and no entropy term.
    """
    if n_classes < 2:
        raise ValueError(f"n_classes(={n_classes}) must be >= 2")
    h_bar = mean_entropy_nats / math.log(n_classes) if mu < 1 else 0.0
    if form == "arxiv":
        return (1.0 - mu) * (1.0 - h_bar) + mu * accuracy
    if form == "journal":
        return ((1.0 - mu) / max(h_bar, 1e-8) if mu < 1 else 0.0) + mu * accuracy
    raise ValueError(f"corr form {form!r}; expected one of {FORMS}")


def lowest(members: Sequence[int], k: int, corr_of: Mapping[int, float], r: int) -> list[int]:
    """The ``r`` members other than ``k`` with the lowest Corr (ties: the larger id is lower), lowest first."""
    others = sorted((j for j in members if j != k), key=lambda j: (corr_of[j], -j))
    return others[:r]


def replace_helpers(members: Sequence[int], k: int, corr_of: Mapping[int, float], candidates: Sequence[int],
                    r: int, size: int) -> list[int]:
    """ReplaceHelper (arXiv Alg. 3): the R lowest (vacant slots first, ranking below any model) against the
    candidates; the best R of both stay (a candidate must beat strictly). Returns the new list, sorted."""
    vacancies = max(0, size - len(members))
    slots = lowest(members, k, corr_of, max(0, r - vacancies))
    pool = [(corr_of[j], 1, -j, j) for j in slots] + [(corr_of[c], 0, -c, c) for c in candidates]
    pool.sort(reverse=True)  # best first; on equal Corr a member (1) ranks above a candidate (0)
    keep = [j for *_, j in pool[: len(slots) + min(vacancies, r)]]
    return sorted(set(members) - set(slots) | set(keep))


def refresh_list(members: Sequence[int], k: int, corr_of: Mapping[int, float], r: int) -> list[int]:
    """UpdateHelper's list Up (arXiv Alg. 2) without k itself: the helpers outside the R lowest."""
    low = set(lowest(members, k, corr_of, r))
    return sorted(j for j in members if j != k and j not in low)


def corr_weights(corrs: Sequence[float]) -> list[float]:
    """The aggregation's (and ``corr_weighted`` labels') helper weights: Corr clipped at 0; all zero → equal."""
    w = [max(float(c), 0.0) for c in corrs]
    return w if sum(w) > 0 else [1.0] * len(w)


def pseudo_labels(probs: torch.Tensor, rule: str = "most_certain", weights: Sequence[float] | None = None) -> torch.Tensor:
    """Soft labels ``(n, C)`` from M helpers' MC-dropout predictions ``probs`` ``(M, n, C)``.

    - ``"most_certain"`` (Eq. 11): ŷ(x) = P_{j*}(x), j* = argmin_j H_j(x) (lowest entropy; ties to the first);
    - ``"mean"``: ŷ(x) = (1/M) Σ_j P_j(x);
    - ``"corr_weighted"``: ŷ(x) = Σ_j a_j P_j(x) / Σ_j a_j with ``weights`` a_j ≥ 0 (Corr(k|j), :func:`corr_weights`).

    Each is a convex combination of the helpers' predictions, so each row still sums to 1.
    """
    if probs.dim() != 3:
        raise ValueError(f"probs(shape={tuple(probs.shape)}) must be (M helpers, n samples, C classes)")
    if rule == "most_certain":
        best = entropy(probs).argmin(0)
        return probs[best, torch.arange(probs.shape[1], device=probs.device)]
    if rule == "mean":
        return probs.mean(0)
    if rule == "corr_weighted":
        if weights is None or len(weights) != probs.shape[0]:
            raise ValueError(f"corr_weighted needs one weight per helper ({probs.shape[0]}); got {weights!r}")
        w = torch.as_tensor(list(weights), dtype=probs.dtype, device=probs.device)
        if bool((w < 0).any()) or not float(w.sum()) > 0:
            raise ValueError(f"corr_weighted weights must be >= 0 and not all 0; got {list(weights)}")
        return torch.einsum("mnc,m->nc", probs, w / w.sum())
    raise ValueError(f"label rule {rule!r}; expected one of {LABEL_RULES}")


def confident(q: torch.Tensor, threshold: float | None) -> torch.Tensor:
    """The KL step's row mask ``(n,)``: 1.0 where max_c ŷ_c ≥ τ, 0.0 elsewhere; all 1.0 without a threshold."""
    if threshold is None:
        return torch.ones(q.shape[0], dtype=q.dtype, device=q.device)
    return (q.max(-1).values >= threshold).to(q.dtype) if q.shape[0] else q.new_zeros(0)


def protocol_steps(t: int, cfg: UMPFSSLConfig) -> tuple[bool, bool]:
    """(ReplaceHelper, UpdateHelper) in round ``t`` ≥ 1: t ≤ F; t % ν = 0 (``every_nu``) or t ≥ ν (``from_nu``)."""
    update = (t % cfg.update_every == 0) if cfg.update_rule == "every_nu" else (t >= cfg.update_every)
    return 1 <= t <= cfg.search_rounds, t >= 1 and update


def cost_fedavg(k_bar: int, rounds: int) -> int:
    """Cost₁ = 2·K̄·n model transmissions (journal Eq. 26; × |w| for bits): FedAvg's downloads and uploads."""
    return 2 * k_bar * rounds


def cost_bound(n_devices: int, k_bar: int, rounds: int, cfg: UMPFSSLConfig) -> float:
    """Cost₂ = K·M·n/ν + F·R·K + K̄·n model transmissions (arXiv Eq. 28; journal Eq. 27 is K = K̄), the bound
    on UM-pFSSL's protocol rounds (the warm-up's uploads come on top)."""
    return n_devices * cfg.helpers * rounds / cfg.update_every + cfg.search_rounds * cfg.replace * n_devices \
        + k_bar * rounds


# --------------------------------------------------------------------------- the client step


def alternating_step(opt, param_keys: Sequence[str]):
    """One mini-batch of Alg. 1 (lines 22–23): an SGD step on the labelled batch's cross-entropy, then one on
    the unlabelled batch's ``KL(ŷ ‖ softmax f(u))`` from the updated weights."""

    def step(inp: StepInputs):
        b, net = inp.batch, inp.net
        params = {k: inp.params[k] for k in param_keys}

        def ce(p):
            out = net.apply(p, b["x"], b.mask("x") if b.padded else None, b.rows("x"))
            return b.mean(F.cross_entropy(out, b["y"], reduction="none"), "x")

        def kl(p):
            out = net.apply(p, b["u"], b.mask("u") if b.padded else None, b.rows("u"))
            per_row = kl_to_soft(out, b["q"])
            return b.mean(per_row * b["m"] if "m" in b else per_row, "u")  # "m": label_threshold's mask

        g = grad(ce)(params)
        params, state = opt.update(params, g, inp.opt_state, 2 * inp.step, inp.lr_scale)
        g = grad(kl)(params)
        params, state = opt.update(params, g, state, 2 * inp.step + 1, inp.lr_scale)
        return params, state, {"loss": ce(params).detach(), "kl": kl(params).detach()}

    return step


def kl_loss(u_key: str = "u"):
    """``per_epoch``'s KL phase: mean over the batch of ``m·KL(ŷ ‖ softmax f(u))`` (``m`` = 1 without a threshold)."""

    def loss(net, b, key):
        (out,) = net.logits(b, u_key)
        per_row = kl_to_soft(out, b["q"])
        value = b.mean(per_row * b["m"] if "m" in b else per_row, u_key)
        return value, {"loss": value}

    return loss


# --------------------------------------------------------------------------- the backend


@dataclass
class _Seen:
    """What device k keeps about a model it evaluated: its version, Corr and predictions on k's unlabelled data."""

    version: int
    corr: float
    probs: torch.Tensor


class UMPFSSL:
    """UM-pFSSL as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    name = "um_pfssl"

    def __init__(self, ctx: Context, cfg: UMPFSSLConfig):
        self.ctx, self.cfg = ctx, cfg
        n = ctx.n_devices
        if cfg.helpers > n:
            fail("helpers", cfg.helpers, f"at most the {n} devices")
        keys = [k for k, _ in ctx.model.named_parameters()]
        t = ctx.train_cfg
        opt = ctx.optimizer(lr=cfg.lr)
        self.task = LocalTask(loss=None, step=alternating_step(opt, keys), optimizer=opt, epochs=ctx.epochs,
                              streams=(Stream("lab", t.batch_size), Stream("unl", t.batch_size)),
                              trainable=frozenset(keys))
        self.warmup = LocalTask(loss=cross_entropy_loss("x"), optimizer=opt, epochs=cfg.warmup_epochs,
                                streams=(Stream("lab", t.batch_size),))
        # local_steps = "per_epoch": one epoch of CE on D^s, then one of KL on D^u, E times
        self.ce_epoch = LocalTask(loss=cross_entropy_loss("x"), optimizer=opt, streams=(Stream("lab", t.batch_size),))
        self.kl_epoch = LocalTask(loss=kl_loss("u"), optimizer=opt, streams=(Stream("unl", t.batch_size),))
        w0 = ctx.init_state()
        self.transfers = t = transfers_for(ctx, list(w0))
        self._w0_error = None
        if t is not None:  # round 0's broadcast of w_0: what every device holds, and the server knows it sent
            w0, self._w0_error = t.download(0, w0)
        self.own: dict[int, dict] = {}  # with error feedback: a device's own model where it differs from the server's copy
        self._received: dict[tuple[int, int, int], tuple[dict, float]] = {}  # this round's decoded copies (memo)
        self._down_errors: list[float] = []  # this round's downloads' relative errors
        self.pool: dict[tuple[int, int], dict] = {(j, -1): w0 for j in range(n)}  # (device, version) → model
        self.latest = [-1] * n  # the version of each device's model on the server (= on the device)
        self.lists: list[dict[int, int]] = [{k: -1} for k in range(n)]  # H_k: helper → version held
        self.seen: list[dict[int, _Seen]] = [{} for _ in range(n)]
        self.sizes = [(c.y_sup.shape[0], c.x_unl.shape[0]) for c in ctx.clients]
        self.class_counts = [torch.bincount(torch.cat([c.y_sup, c.y_unl_hidden]).cpu(), minlength=ctx.n_classes).tolist()
                             for c in ctx.clients]
        self.transmissions = 0
        self._pending: dict[int, tuple[dict[int, int], dict[int, _Seen]]] = {}
        self._train: dict[int, tuple] = {}  # sampled device → (its data, its soft labels, threshold mask or None)
        self._start_rates: dict[int, dict] = {}  # sampled device → its start model's one-rule label tallies
        self._accuracy: dict[tuple[int, int], tuple[float, float]] = {}
        self.selected: tuple[int, ...] = ()
        self.vectorize = cfg.vectorize == "on" or (cfg.vectorize == "auto" and ctx.device.type == "cuda")

    # ----------------------------------------------------------------- evaluation of helpers on a device

    def _evaluate(self, k: int, models: Sequence[tuple[int, int]]) -> dict[int, _Seen]:
        """Corr(k|j) and j's MC-dropout predictions on k's unlabelled data, for each (j, version)."""
        if not models:
            return {}
        ctx, c = self.ctx, self.ctx.clients[k]
        n_s, n_u = self.sizes[k]
        x = torch.cat([c.x_sup, c.x_unl])
        seeds = [ctx.seed_for("um_mc", k, j, v + 1) for j, v in models]
        probs = mc_dropout_proba(ctx.model, [self._model_on(k, j, v) for j, v in models], x, self.cfg.mc_passes, seeds,
                                 batch_size=ctx.train_cfg.eval_batch_size, vectorize=self.vectorize)
        mu = labeled_share(n_s, n_u)
        out = {}
        for i, (j, v) in enumerate(models):
            p_s, p_u = probs[i, :n_s], probs[i, n_s:]
            acc = float((p_s.argmax(-1) == c.y_sup).float().mean()) if n_s else 0.0
            h = float(entropy(p_u).mean()) if n_u else 0.0
            out[j] = _Seen(v, corr(h, acc, mu, ctx.n_classes, self.cfg.corr_form), p_u)
        return out

    def _own_model(self, k: int) -> dict:
        """Device k's own model: the server's copy of it, or with error feedback the one k kept."""
        return self.own[k] if k in self.own else self.pool[(k, self.latest[k])]

    def _model_on(self, k: int, j: int, v: int) -> dict:
        """Model (j, v) as device k holds it: its own model (j = k), else its decoded download of the pool's copy."""
        if j == k:
            return self._own_model(k)
        if self.transfers is None or self.transfers.cfg.downlink.is_none:
            return self.pool[(j, v)]
        return self._receive(k, j, v)[0]

    def _receive(self, k: int, j: int, v: int) -> tuple[dict, float]:
        """Device k's download of model (j, v): the decoded state and its relative error (stream ``("compress",
        "downlink", "model", j, v + 1, k)``: a device downloading one version twice receives the same encoding)."""
        key = (k, j, v)
        if key not in self._received:
            gen = self.ctx.generator("compress", "downlink", "model", j, v + 1, k)  # versions start at -1
            self._received[key] = self.transfers.received(self.pool[(j, v)], gen)
        return self._received[key]

    def _corr_of(self, k: int, members: Mapping[int, int], seen: dict[int, _Seen]) -> tuple[dict[int, float], int]:
        """Corr of every member at the version k holds, evaluating the unseen ones; (Corr, models evaluated)."""
        need = [(j, v) for j, v in members.items() if j not in seen or seen[j].version != v]
        seen.update(self._evaluate(k, need))
        return {j: seen[j].corr for j in members}, len(need)

    def _protocol(self, k: int, t: int, sampled: bool, replace: bool, update: bool) -> tuple[dict, dict, dict]:
        """Device k's helper protocol in round t: (new list, what it keeps, counts of downloads and evaluations)."""
        cfg, n = self.cfg, self.ctx.n_devices
        members, seen = dict(self.lists[k]), dict(self.seen[k])
        counts = {"replace": 0, "update": 0, "fill": 0, "evaluated": 0}
        downloads: list[tuple[int, int]] = []
        rng = self.ctx.rng("um_pfssl", t, k)
        if replace:
            outside = [j for j in range(n) if j not in members]
            cands = sorted(int(j) for j in rng.choice(outside, size=min(cfg.replace, len(outside)), replace=False))
            counts["replace"] += len(cands)
            everyone = {**members, **{j: self.latest[j] for j in cands}}
            downloads += [(j, everyone[j]) for j in cands]
            corr_of, e = self._corr_of(k, everyone, seen)
            counts["evaluated"] += e
            kept = replace_helpers(list(members), k, corr_of, cands, cfg.replace, cfg.helpers)
            members = {j: everyone[j] for j in kept}
        if update:
            corr_of, e = self._corr_of(k, members, seen)
            counts["evaluated"] += e
            for j in refresh_list(list(members), k, corr_of, cfg.replace):
                if self.latest[j] > members[j]:
                    members[j] = self.latest[j]
                    counts["update"] += 1
                    downloads.append((j, members[j]))
        if sampled and len(members) < cfg.helpers:
            outside = [j for j in range(n) if j not in members]
            for j in rng.choice(outside, size=cfg.helpers - len(members), replace=False):
                members[int(j)] = self.latest[int(j)]
                counts["fill"] += 1
                downloads.append((int(j), members[int(j)]))
        members[k] = self.latest[k]
        if sampled:
            _, e = self._corr_of(k, members, seen)
            counts["evaluated"] += e
        seen = {j: s for j, s in seen.items() if j in members and s.version == members[j]}
        if self.transfers is not None and not self.transfers.cfg.downlink.is_none:
            self._down_errors += [self._receive(k, j, v)[1] for j, v in downloads]
        return members, seen, counts

    # ----------------------------------------------------------------- the round

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx, cfg, t = self.ctx, self.cfg, view.round_index
        n, bits = ctx.n_devices, float(ctx.model_bits)
        up_bits, down_bits = (bits, bits) if self.transfers is None else (self.transfers.up_bits, self.transfers.down_bits)
        self._pending, self._train, self._received, self._down_errors = {}, {}, {}, []
        self._start_rates = {}
        if t == 0:  # warm-up: everyone receives w_0, trains on its labelled data, uploads
            self.selected = tuple(range(n))
            cycles = [task_cycles(self.warmup, {"lab": self.sizes[d][0]}, ctx.cycles_per_sample) for d in range(n)]
            work = tuple(DeviceWork(d, {"train": cycles[d]}, upload_bits=up_bits, download_bits=down_bits) for d in range(n))
            self.transmissions += 2 * n
            return RoundPlan(work, info={"K": n, "transmissions": 2 * n, "transmissions_total": self.transmissions})
        self.selected = sample_clients(ctx, t, ctx.run_cfg.clients_per_round)
        replace, update = protocol_steps(t, cfg)
        everyone = cfg.helper_devices == "all" and (replace or update)
        workers = range(n) if everyone else self.selected
        totals = {"replace": 0, "update": 0, "fill": 0, "evaluated": 0}
        work = []
        for k in workers:
            sampled = k in self.selected
            members, seen, counts = self._protocol(k, t, sampled, replace, update)
            self._pending[k] = (members, seen)
            for key in totals:
                totals[key] += counts[key]
            n_s, n_u = self.sizes[k]
            cycles = {"helpers": forward_cycles(ctx.cycles_per_sample, n_s + n_u, counts["evaluated"], cfg.mc_passes)}
            if sampled:
                cycles["train"] = self._train_cycles(n_s, n_u)
            downloads = counts["replace"] + counts["update"] + counts["fill"]
            work.append(DeviceWork(k, cycles, upload_bits=up_bits if sampled else 0.0, download_bits=downloads * down_bits))
        sent = totals["replace"] + totals["update"] + totals["fill"] + len(self.selected)
        self.transmissions += sent
        info = {"K": len(self.selected), "downloads_replace": totals["replace"], "downloads_update": totals["update"],
                "downloads_fill": totals["fill"], "helper_evaluations": totals["evaluated"], "transmissions": sent,
                "transmissions_total": self.transmissions}
        return RoundPlan(tuple(work), info=info)

    def _train_cycles(self, n_s: int, n_u: int) -> float:
        """The local training's cycles: the task's real passes (per_batch), or E·(a CE epoch + a KL epoch)."""
        cps = self.ctx.cycles_per_sample
        if self.cfg.local_steps == "per_batch":
            return task_cycles(self.task, {"lab": n_s, "unl": n_u}, cps)
        return self.ctx.epochs * (task_cycles(self.ce_epoch, {"lab": n_s}, cps)
                                            + task_cycles(self.kl_epoch, {"unl": n_u}, cps))

    def _train_per_epoch(self, t: int, train: Sequence[int], starts: list, data: list) -> LocalTrainResult:
        """``local_steps = "per_epoch"``: E times a CE epoch on D^s (generator stream ``"train"`` in epoch 0, as every
        algorithm's labelled order) then a KL epoch on D^u; the reported loss is the CE phases' mean."""
        ctx, states, ce_losses, kls, steps = self.ctx, list(starts), [], [], [0] * len(train)
        for e in range(ctx.epochs):
            ce = train_devices(ctx, self.name, t, train, states, [{"lab": d["lab"]} for d in data], self.ce_epoch,
                               stream="train" if e == 0 else f"train-ce-{e}")
            kl = train_devices(ctx, self.name, t, train, ce.params, [{"unl": d["unl"]} for d in data], self.kl_epoch,
                               stream=f"train-kl-{e}")
            states = kl.params
            ce_losses.append(ce.mean_loss)
            kls.append(kl.mean_loss)
            steps = [a + b + c for a, b, c in zip(steps, ce.n_steps, kl.n_steps)]

        def mean_over_epochs(per_epoch: list[list[float]]) -> list[float]:
            cols = [[v for v in col if not math.isnan(v)] for col in zip(*per_epoch)]
            return [float(np.mean(c)) if c else float("nan") for c in cols]

        return LocalTrainResult(states, mean_over_epochs(ce_losses), steps, {"kl": mean_over_epochs(kls)})

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, t = self.ctx, outcome.round_index
        dropped = set(outcome.dropped)
        for k, (members, seen) in self._pending.items():
            if k not in dropped:
                self.lists[k], self.seen[k] = members, seen
        train = [k for k in self.selected if k in set(outcome.arrived)]
        if t == 0:
            starts = [self.pool[(k, -1)] for k in train]
            data = [{"lab": {"x": ctx.clients[k].x_sup, "y": ctx.clients[k].y_sup}} for k in train]
            task = self.warmup
        else:
            starts, data = [], []
            for k in train:
                members, seen = self.lists[k], self.seen[k]
                helpers = sorted(members.items())
                a = corr_weights([seen[j].corr for j, _ in helpers])
                starts.append(weighted_average([(self._model_on(k, j, v), w) for (j, v), w in zip(helpers, a)]))
                c = ctx.clients[k]
                if c.x_unl.shape[0]:
                    q = pseudo_labels(torch.stack([seen[j].probs for j, _ in helpers]), self.cfg.label_rule, a)
                else:
                    q = torch.zeros(0, ctx.n_classes, device=c.x_unl.device)
                unl = {"u": c.x_unl, "q": q}
                if self.cfg.label_threshold is not None:
                    unl["m"] = confident(q, self.cfg.label_threshold)
                data.append({"lab": {"x": c.x_sup, "y": c.y_sup}, "unl": unl})
                self._train[k] = (c, q, unl.get("m"))
            self._start_rates = dict(zip(train, start_label_rates_of(ctx, train, starts)))  # the one rule (54.1)
            task = self.task
        if train and t > 0 and self.cfg.local_steps == "per_epoch":
            result = self._train_per_epoch(t, train, starts, data)
        else:
            result = train_devices(ctx, self.name, t, train, starts, data, task) if train else None
        up_errors = []
        for k, state in zip(train, result.params if result else []):
            self.pool[(k, t)] = self._upload(t, k, state, up_errors)
            self.latest[k] = t
            self.lists[k][k] = t
        self._collect_garbage()
        metrics = self._metrics(result)
        if self.transfers is not None:
            down = self._w0_error if t == 0 else (float(np.mean(self._down_errors)) if self._down_errors else None)
            metrics.update(self.transfers.metrics(up_errors, down))
        return metrics

    def _upload(self, t: int, k: int, state: dict, errors: list[float]) -> dict:
        """What the server's pool holds of device k's trained ``state``: ``state`` itself, or with a compressed
        uplink the server's copy plus the decoded difference (module docstring); with error feedback k keeps
        ``state`` as its own model."""
        tr = self.transfers
        if tr is None or tr.cfg.uplink.is_none:
            return state
        rebuilt, error = tr.upload_difference(t, k, state, self.pool[(k, self.latest[k])])
        errors.append(error)
        if tr.cfg.uplink.error_feedback:
            self.own[k] = state
        return rebuilt

    def _collect_garbage(self) -> None:
        live = {(j, v) for lst in self.lists for j, v in lst.items()} | {(j, v) for j, v in enumerate(self.latest)}
        for key in [key for key in self.pool if key not in live]:
            del self.pool[key]

    def _metrics(self, result) -> dict[str, float]:
        ctx = self.ctx
        tested, labelled = due_devices(ctx), due_devices(ctx, labels=True)
        # each device's own model at its latest version, evaluated once per version (kept until it changes)
        for which, devices in ((0, tested), (1, labelled)):
            need = [k for k in devices or () if self._accuracy.get((k, self.latest[k]), (None, None))[which] is None]
            models = {k: self._own_model(k) for k in need}
            c = ctx.clients
            parts = [(c[k].x_test, c[k].y_test) if which == 0 else (c[k].x_unl, c[k].y_unl_hidden) for k in need]
            with phase("evaluation" if which == 0 else "labelling"):
                accs = accuracy_per_device(ctx, [models[k] for k in need], parts)
            for k, a in zip(need, accs):
                pair = list(self._accuracy.get((k, self.latest[k]), (None, None)))
                pair[which] = a
                self._accuracy[(k, self.latest[k])] = tuple(pair)
        self._accuracy = {key: v for key, v in self._accuracy.items() if key[1] == self.latest[key[0]]}
        accs = None if tested is None else [self._accuracy[(k, self.latest[k])][0] if k in set(tested) else
                                            float("nan") for k in range(ctx.n_devices)]
        labs = None if labelled is None else [self._accuracy[(k, self.latest[k])][1] if k in set(labelled) else
                                              float("nan") for k in range(ctx.n_devices)]
        metrics = {**accuracy_metrics(accs), **accuracy_metrics(labs, "labeling_accuracy")}
        if result is not None:  # train_devices has checked its losses
            metrics["train_loss"] = mean_loss(result)
        metrics.update(step_metrics(result) if result is not None else NO_STEPS)
        metrics.update(round_label_metrics([{**label_rates(q, c.y_unl_hidden, m), **self._start_rates.get(k, {})}
                                            for k, (c, q, m) in self._train.items()],
                                           mask_rate=self.cfg.label_threshold is not None))
        corrs = [s.corr for seen in self.seen for s in seen.values()]
        if corrs:
            metrics["helper_corr"] = float(np.mean(corrs))
        return metrics

    # ----------------------------------------------------------------- who helps whom

    def graph(self) -> dict:
        """The helper lists (``edgesim.scenarios.graphs``): an edge k → j for each helper j ≠ k of device k, weighted by
        Corr(k|j); nodes carry μ_k, whether they trained this round and the device's true class counts (labelled
        and unlabelled: the Dirichlet split the helper communities can be held against)."""
        nodes = {k: {"labeled_share": labeled_share(*self.sizes[k]), "sampled": k in self.selected,
                     "class_counts": counts, "dominant_class": int(np.argmax(counts))}
                 for k, counts in enumerate(self.class_counts)}
        edges = [(k, j, {"weight": self.seen[k][j].corr} if j in self.seen[k] else {})
                 for k, lst in enumerate(self.lists) for j in sorted(lst) if j != k]
        return {"graph": {"kind": "helpers"}, "nodes": nodes, "edges": edges}

    # ----------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict:
        return {
            "pool": {f"{j}:{v}": to_cpu(s) for (j, v), s in self.pool.items()},
            "latest": list(self.latest),
            "lists": [{str(j): v for j, v in lst.items()} for lst in self.lists],
            "seen": [{str(j): (s.version, s.corr, s.probs.cpu()) for j, s in seen.items()} for seen in self.seen],
            "transmissions": self.transmissions,
            **({"own": {str(k): to_cpu(s) for k, s in sorted(self.own.items())}} if self.own else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        self.pool = {tuple(int(x) for x in key.split(":")): to_device(self.ctx, s) for key, s in state["pool"].items()}
        self.latest = [int(v) for v in state["latest"]]
        self.lists = [{int(j): int(v) for j, v in lst.items()} for lst in state["lists"]]
        dev = self.ctx.device
        self.seen = [{int(j): _Seen(int(v), float(c), p.to(dev)) for j, (v, c, p) in seen.items()} for seen in state["seen"]]
        self.transmissions = int(state["transmissions"])
        self.own = {int(k): to_device(self.ctx, s) for k, s in state.get("own", {}).items()}
        self._accuracy = {}


@register("um_pfssl", UMPFSSLConfig, "UM-pFSSL: helpers chosen by uncertainty pseudo-label each device's data",
          display="UM-pFSSL")
def build_um_pfssl(ctx: Context, cfg: UMPFSSLConfig) -> UMPFSSL:
    return UMPFSSL(ctx, cfg)
