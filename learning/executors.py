"""Local training of many clients: the same update, run one client at a time or vectorised.

What is computed (both executors, ALGORITHMS.md §1.5 / §5.6): for each client,
``epochs`` passes over its samples in a fresh random order drawn from that
client's own generator, mini-batches of ``batch_size`` (the last one may be
smaller), SGD exactly as ``torch.optim.SGD`` (momentum buffer = first gradient,
dampening 0, no Nesterov, weight decay added to the gradient), fresh optimizer
state per client per call. The objective of one batch ``b`` is

    L_b(w) = (1/|b|) Σ_{i∈b} ω_i ℓ(f_w(x_i), y_i) + penalty(w, w_start) + (μ/2)‖w − w_start‖²

with ``ℓ`` the per-sample loss hook (cross-entropy by default; soft targets
work too), ``ω_i`` optional per-sample weights (default 1) and ``μ`` FedProx's
``prox_mu`` (Li et al., MLSys 2020, Eq. 2), whose gradient ``μ(w − w_start)`` is
added to the data gradient directly, so μ = 0 is plain training bit for bit.

How it runs is separate (STYLE.md, FedJAX + torch.func):

- :class:`SequentialExecutor` — a plain loop: ``functional_call`` on per-client
  tensors and ``torch.optim.SGD``; the reference, and fastest on a CPU.
- :class:`VmapExecutor` — all clients at once: parameters stacked along a
  leading client dimension, ``vmap(grad(loss))`` over them and
  :func:`sgd_momentum_step` on the stacked tensors. Clients with fewer samples
  get padded, masked batches and, once done, no-op steps, so the result equals
  the sequential one (to float rounding, ~1e-6). Models it cannot vectorise
  exactly (BatchNorm running statistics, dropout) go to the sequential loop
  with a warning — see :meth:`VmapExecutor.unsupported_reason`.

Randomness is explicit: one CPU ``torch.Generator`` (or int seed) per client;
sample orders are drawn on the CPU so they are the same on every device.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Protocol, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from learning.models import draw_seed, seeded_torch_rng, stochastic_modules

Params = dict[str, torch.Tensor]
ClientData = Union[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
GeneratorLike = Union[torch.Generator, int]
SampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Penalty = Callable[[Params, Params], torch.Tensor]


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class LocalTrainConfig:
    """SGD hyper-parameters of one round of local training.

    ``lr`` step size; ``momentum``, ``weight_decay`` as ``torch.optim.SGD``;
    ``batch_size`` samples per step (last batch of an epoch may be smaller);
    ``epochs`` passes over the client's data; ``prox_mu`` FedProx's μ ≥ 0.
    """

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    batch_size: int = 32
    epochs: int = 1
    prox_mu: float = 0.0

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr(={self.lr}) must be > 0")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum(={self.momentum}) must be in [0, 1)")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay(={self.weight_decay}) must be >= 0")
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"batch_size(={self.batch_size}) must be an int >= 1")
        if not (isinstance(self.epochs, int) and self.epochs >= 0):
            raise ValueError(f"epochs(={self.epochs}) must be an int >= 0")
        if not self.prox_mu >= 0:
            raise ValueError(f"prox_mu(={self.prox_mu}) must be >= 0")


def cross_entropy_per_sample(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy; ``target`` is class indices ``(B,)`` or probabilities ``(B, C)``."""
    return F.cross_entropy(output, target, reduction="none")


@dataclass(frozen=True)
class LocalObjective:
    """The extension point for what a client minimises (FedProx's μ lives in the config).

    ``sample_loss(output, target) -> (B,)``: loss of each sample of a batch;
    ``target`` is the batch of the client's ``y`` (any tensor indexed by sample:
    labels, soft pseudo-labels, …). The executor weights it by the optional
    per-sample weights and divides by the number of real samples in the batch.
    ``penalty(params, start_params) -> scalar`` (optional): a term on the
    trainable parameters, e.g. a proximal or distillation regulariser; it is
    differentiated by autograd.

    Both must be pure torch functions of their arguments (no ``.item()``, no
    data-dependent Python branches, no in-place updates of inputs), so that
    ``torch.func.vmap`` can run them for many clients at once.
    """

    sample_loss: SampleLoss = cross_entropy_per_sample
    penalty: Penalty | None = None


DEFAULT_OBJECTIVE = LocalObjective()


@dataclass(frozen=True)
class LocalTrainResult:
    """Per client: final state (params + buffers), mean data loss over its training samples, steps taken.

    ``mean_loss`` is the sample-weighted mean of the batch data losses (before
    each step; penalty and prox terms excluded); NaN for a client that took no
    step.
    """

    params: list[Params]
    mean_loss: list[float]
    n_steps: list[int]


# --------------------------------------------------------------------------- shared pieces


def sgd_momentum_step(
    param: torch.Tensor,
    grad_: torch.Tensor,
    buf: torch.Tensor | None,
    *,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    first_step: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One ``torch.optim.SGD`` step (dampening 0, no Nesterov), functional: returns ``(param, buf)``.

    ``d = g + weight_decay·p``; with momentum ``buf = d`` on the first step, else
    ``buf = momentum·buf + d``, and ``d = buf``; then ``p ← p − lr·d``. The same
    operations in the same order as torch's single-tensor SGD, so one client's
    result is bit-identical; works on stacked (client-leading) tensors as is.
    """
    d = grad_
    if weight_decay != 0:
        d = d.add(param, alpha=weight_decay)
    if momentum != 0:
        buf = d.detach().clone() if first_step or buf is None else buf.mul(momentum).add(d)
        d = buf
    return param.add(d, alpha=-lr), buf


def as_generator(g: GeneratorLike) -> torch.Generator:
    """A CPU ``torch.Generator``: ``g`` itself, or a new one seeded with the int ``g``."""
    if isinstance(g, torch.Generator):
        if g.device.type != "cpu":
            raise ValueError(f"generator device(={g.device}) must be cpu (sample orders are drawn on the CPU)")
        return g
    if isinstance(g, int) and not isinstance(g, bool):
        return torch.Generator().manual_seed(g)
    raise ValueError(f"generator(={g!r}) must be a torch.Generator or an int seed")


def client_schedule(n_samples: int, batch_size: int, epochs: int, generator: torch.Generator) -> list[torch.Tensor]:
    """The client's mini-batches as CPU index tensors: per epoch ``randperm(n)`` split into ``batch_size`` chunks.

    Both executors use this, so they visit the same samples in the same order.
    """
    steps: list[torch.Tensor] = []
    for _ in range(epochs):
        if n_samples == 0:
            break
        steps.extend(torch.randperm(n_samples, generator=generator).split(batch_size))
    return steps


def _trainable_names(model: nn.Module) -> list[str]:
    return [n for n, p in model.named_parameters() if p.requires_grad]


def _check_inputs(
    model: nn.Module,
    start_params: Sequence[Mapping[str, torch.Tensor]],
    datasets: Sequence[ClientData],
    generators: Sequence[GeneratorLike],
) -> list[str]:
    keys = list(model.state_dict().keys())
    if not (len(start_params) == len(datasets) == len(generators)):
        raise ValueError(
            f"start_params, datasets and generators must have one entry per client "
            f"(got {len(start_params)}, {len(datasets)}, {len(generators)})"
        )
    for k, (sp, data) in enumerate(zip(start_params, datasets)):
        missing, extra = set(keys) - set(sp), set(sp) - set(keys)
        if missing or extra:
            raise ValueError(
                f"client {k}: start_params keys must be the model's state_dict keys; "
                f"missing {sorted(missing)}, unexpected {sorted(extra)}"
            )
        if len(data) not in (2, 3):
            raise ValueError(f"client {k}: dataset must be (x, y) or (x, y, sample_weights), got {len(data)} tensors")
        n = data[0].shape[0]
        if any(t.shape[0] != n for t in data[1:]):
            raise ValueError(f"client {k}: x, y (and weights) differ in length {[t.shape[0] for t in data]}")
    return keys


def _check_sample_loss(loss: torch.Tensor, n: int) -> None:
    if loss.shape != (n,):
        raise ValueError(f"sample_loss must return one loss per sample, shape ({n},); got {tuple(loss.shape)}")


@contextlib.contextmanager
def _mode(model: nn.Module, training: bool) -> Iterator[None]:
    modes = {m: m.training for m in model.modules()}
    try:
        model.train(training)
        yield
    finally:
        for m, t in modes.items():
            m.training = t


class Executor(Protocol):
    def train(
        self,
        model: nn.Module,
        start_params: list[Params],
        datasets: list[ClientData],
        generators: list[GeneratorLike],
        cfg: LocalTrainConfig,
        *,
        objective: LocalObjective = DEFAULT_OBJECTIVE,
    ) -> list[Params]: ...

    def train_with_stats(
        self,
        model: nn.Module,
        start_params: list[Params],
        datasets: list[ClientData],
        generators: list[GeneratorLike],
        cfg: LocalTrainConfig,
        *,
        objective: LocalObjective = DEFAULT_OBJECTIVE,
    ) -> LocalTrainResult: ...


# --------------------------------------------------------------------------- sequential


class SequentialExecutor:
    """One client after another: ``functional_call`` + autograd + ``torch.optim.SGD``.

    ``model`` is only a template (its structure and train/eval behaviour); its
    own parameters are not touched. Works for every model: BatchNorm running
    statistics are updated in the returned state, and dropout draws its masks
    under a seed drawn from the client's generator (after its sample orders),
    with torch's global RNG restored afterwards.
    """

    name = "sequential"

    def train(self, model, start_params, datasets, generators, cfg, *, objective=DEFAULT_OBJECTIVE) -> list[Params]:
        """Final state of each client after local training (see the module docstring)."""
        return self.train_with_stats(model, start_params, datasets, generators, cfg, objective=objective).params

    def train_with_stats(
        self,
        model: nn.Module,
        start_params: list[Params],
        datasets: list[ClientData],
        generators: list[GeneratorLike],
        cfg: LocalTrainConfig,
        *,
        objective: LocalObjective = DEFAULT_OBJECTIVE,
    ) -> LocalTrainResult:
        _check_inputs(model, start_params, datasets, generators)
        trainable = _trainable_names(model)
        stochastic = bool(stochastic_modules(model))
        out_params, losses, steps = [], [], []
        with _mode(model, True):
            for sp, data, g in zip(start_params, datasets, generators):
                p, loss, n_steps = self._train_one(model, trainable, stochastic, sp, data, as_generator(g), cfg, objective)
                out_params.append(p)
                losses.append(loss)
                steps.append(n_steps)
        return LocalTrainResult(out_params, losses, steps)

    @staticmethod
    def _train_one(model, trainable, stochastic, sp, data, gen, cfg, objective) -> tuple[Params, float, int]:
        x, y = data[0], data[1]
        w = data[2] if len(data) == 3 else None
        schedule = client_schedule(x.shape[0], cfg.batch_size, cfg.epochs, gen)
        rng = seeded_torch_rng(draw_seed(gen), x.device) if stochastic else contextlib.nullcontext()
        state = {k: v.detach().clone() for k, v in sp.items()}
        start = {n: sp[n].detach() for n in trainable}
        live = [state[n].requires_grad_(True) for n in trainable]
        opt = torch.optim.SGD(live, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay) if live else None
        loss_sum = torch.zeros((), dtype=torch.float64, device=x.device)
        n_seen = 0
        with rng:
            for idx in schedule:
                idx = idx.to(x.device)
                nb = idx.numel()
                out = functional_call(model, state, (x[idx],))
                per = objective.sample_loss(out, y[idx])
                _check_sample_loss(per, nb)
                if w is not None:
                    per = per * w[idx]
                data_loss = per.sum() / nb
                total = data_loss
                if objective.penalty is not None:
                    total = total + objective.penalty({n: state[n] for n in trainable}, start)
                if opt is None:
                    continue
                opt.zero_grad(set_to_none=True)
                total.backward()
                if cfg.prox_mu != 0:
                    for n in trainable:
                        state[n].grad.add_(state[n].detach() - start[n], alpha=cfg.prox_mu)
                opt.step()
                loss_sum += data_loss.detach().double() * nb
                n_seen += nb
        final = {k: v.detach() for k, v in state.items()}
        mean = float(loss_sum) / n_seen if n_seen else float("nan")
        return final, mean, len(schedule)


# --------------------------------------------------------------------------- vectorised


def stack_params(params_list: Sequence[Mapping[str, torch.Tensor]]) -> Params:
    """Stack per-model dicts along a new leading dimension (same keys in every dict)."""
    if not params_list:
        raise ValueError("params_list is empty")
    keys = list(params_list[0].keys())
    for i, p in enumerate(params_list):
        if set(p) != set(keys):
            raise ValueError(f"params_list[{i}] has keys {sorted(p)}, expected {sorted(keys)}")
    return {k: torch.stack([p[k].detach() for p in params_list]) for k in keys}


def unstack_params(stacked: Mapping[str, torch.Tensor]) -> list[Params]:
    """Inverse of :func:`stack_params` (views, no copies)."""
    n = next(iter(stacked.values())).shape[0]
    return [{k: v[i] for k, v in stacked.items()} for i in range(n)]


class VmapExecutor:
    """All clients at once with ``torch.func``: ``vmap(grad(loss))`` over stacked parameters.

    ``fallback``: what to do with a model that cannot be vectorised exactly
    (:meth:`unsupported_reason`): ``"sequential"`` (default) trains it with
    :class:`SequentialExecutor` and warns; ``"error"`` raises ``ValueError``.
    ``max_clients`` bounds memory by vectorising at most that many clients per
    pass (``None``: all of them).
    """

    name = "vmap"

    def __init__(self, fallback: str = "sequential", max_clients: int | None = None) -> None:
        if fallback not in ("sequential", "error"):
            raise ValueError(f"fallback(={fallback!r}) must be 'sequential' or 'error'")
        if max_clients is not None and max_clients < 1:
            raise ValueError(f"max_clients(={max_clients}) must be >= 1 or None")
        self.fallback = fallback
        self.max_clients = max_clients

    @staticmethod
    def unsupported_reason(model: nn.Module) -> str | None:
        """Why ``model`` cannot be trained vectorised with results equal to the loop; ``None`` if it can.

        - Buffers (BatchNorm): in train mode the batch statistics would include
          the padding rows of shorter clients (and the forward of clients whose
          steps are over), so results would differ from the loop.
        - Dropout: under vmap the masks come from one batched random stream,
          not from each client's own seed, so results would differ from the
          sequential executor (and from run to run of different client sets).
        """
        bufs = [n for n, _ in model.named_buffers()]
        if bufs:
            return f"model has buffers ({', '.join(bufs[:3])}{', ...' if len(bufs) > 3 else ''}: BatchNorm statistics)"
        drop = stochastic_modules(model)
        if drop:
            return f"model has dropout ({', '.join(drop[:3])}): per-client random masks"
        return None

    def train(self, model, start_params, datasets, generators, cfg, *, objective=DEFAULT_OBJECTIVE) -> list[Params]:
        """Final state of each client after local training (see the module docstring)."""
        return self.train_with_stats(model, start_params, datasets, generators, cfg, objective=objective).params

    def train_with_stats(
        self,
        model: nn.Module,
        start_params: list[Params],
        datasets: list[ClientData],
        generators: list[GeneratorLike],
        cfg: LocalTrainConfig,
        *,
        objective: LocalObjective = DEFAULT_OBJECTIVE,
    ) -> LocalTrainResult:
        _check_inputs(model, start_params, datasets, generators)
        reason = self.unsupported_reason(model)
        if reason is not None:
            if self.fallback == "error":
                raise ValueError(f"VmapExecutor cannot vectorise {type(model).__name__}: {reason}")
            warnings.warn(
                f"VmapExecutor: {type(model).__name__} {reason}; training it with SequentialExecutor",
                stacklevel=2,
            )
            return SequentialExecutor().train_with_stats(
                model, start_params, datasets, generators, cfg, objective=objective
            )
        k = len(datasets)
        if k == 0:
            return LocalTrainResult([], [], [])
        chunk = self.max_clients or k
        parts = []
        with _mode(model, True):
            for i in range(0, k, chunk):
                sl = slice(i, i + chunk)
                parts.append(
                    self._train_stacked(
                        model, start_params[sl], datasets[sl], [as_generator(g) for g in generators[sl]], cfg, objective
                    )
                )
        return LocalTrainResult(
            [p for r in parts for p in r.params],
            [v for r in parts for v in r.mean_loss],
            [s for r in parts for s in r.n_steps],
        )

    @staticmethod
    def _train_stacked(model, start_params, datasets, gens, cfg, objective) -> LocalTrainResult:
        k = len(datasets)
        trainable = _trainable_names(model)
        fixed = [n for n in start_params[0] if n not in trainable]
        device = datasets[0][0].device
        sizes = [d[0].shape[0] for d in datasets]
        shapes = {(tuple(d[0].shape[1:]), d[0].dtype, d[0].device) for d in datasets}
        if len(shapes) > 1:
            raise ValueError(f"clients' x differ in sample shape/dtype/device: {sorted(map(str, shapes))}")
        schedules = [client_schedule(n, cfg.batch_size, cfg.epochs, g) for n, g in zip(sizes, gens)]
        n_steps = [len(s) for s in schedules]

        stacked = stack_params(start_params)
        params = {n: stacked[n].clone() for n in trainable}
        start = {n: stacked[n] for n in trainable}
        frozen = {n: stacked[n] for n in fixed}
        bufs = {n: torch.zeros_like(p) for n, p in params.items()} if cfg.momentum != 0 else {n: None for n in params}
        loss_sum = torch.zeros(k, dtype=torch.float64, device=device)
        max_steps = max(n_steps)
        if max_steps == 0 or not trainable:
            return LocalTrainResult(
                [{key: stacked[key][i] for key in stacked} for i in range(k)], [float("nan")] * k, n_steps
            )

        x_all = torch.cat([d[0] for d in datasets])
        y_all = torch.cat([d[1] for d in datasets])
        weighted = any(len(d) == 3 for d in datasets)
        w_all = (
            torch.cat([d[2] if len(d) == 3 else torch.ones(n, dtype=torch.float32, device=device)
                       for d, n in zip(datasets, sizes)])
            if weighted else None
        )
        offsets = torch.tensor([0] + sizes[:-1]).cumsum(0).tolist()
        sample_loss, penalty = objective.sample_loss, objective.penalty

        def client_loss(p, fz, p0, xb, yb, wb, n_real):
            out = functional_call(model, {**p, **fz}, (xb,))
            per = sample_loss(out, yb)
            _check_sample_loss(per, xb.shape[0])
            data_loss = (per * wb).sum() / n_real
            total = data_loss if penalty is None else data_loss + penalty(p, p0)
            return total, data_loss

        grad_fn = vmap(grad(client_loss, has_aux=True))
        for s in range(max_steps):
            width = max((schedules[c][s].numel() for c in range(k) if s < n_steps[c]), default=0)
            gidx = torch.zeros((k, width), dtype=torch.long)
            mask = torch.zeros((k, width), dtype=torch.float32)
            active = torch.tensor([s < n for n in n_steps])
            for c in range(k):
                if s < n_steps[c]:
                    b = schedules[c][s]
                    gidx[c, : b.numel()] = b + offsets[c]
                    gidx[c, b.numel():] = offsets[c]  # padding: a real sample of the same client, masked out
                    mask[c, : b.numel()] = 1.0
                else:
                    gidx[c] = offsets[c] if sizes[c] else 0
            n_real = mask.sum(1)
            gidx, mask, n_real = gidx.to(device), mask.to(device), n_real.to(device)
            xb, yb = x_all[gidx], y_all[gidx]
            wb = mask if w_all is None else w_all[gidx] * mask.to(w_all.dtype)
            grads, data_loss = grad_fn(params, frozen, start, xb, yb, wb, n_real.clamp(min=1.0))
            loss_sum += data_loss.detach().double() * n_real.double()
            all_active = bool(active.all())
            act = active.to(device)
            for n in trainable:
                g = grads[n]
                if cfg.prox_mu != 0:
                    g = g.add(params[n] - start[n], alpha=cfg.prox_mu)
                new_p, new_b = sgd_momentum_step(
                    params[n], g, bufs[n], lr=cfg.lr, momentum=cfg.momentum,
                    weight_decay=cfg.weight_decay, first_step=(s == 0),
                )
                if all_active:
                    params[n], bufs[n] = new_p, new_b
                else:
                    a = act.view(k, *([1] * (new_p.dim() - 1)))
                    params[n] = torch.where(a, new_p, params[n])
                    if new_b is not None:
                        bufs[n] = torch.where(a, new_b, bufs[n])
        totals = [sum(b.numel() for b in sched) for sched in schedules]
        out = [{**{n: params[n][i] for n in trainable}, **{n: frozen[n][i] for n in fixed}} for i in range(k)]
        out = [{key: o[key] for key in start_params[0]} for o in out]  # the callers' key order
        means = [float(loss_sum[i]) / t if t else float("nan") for i, t in enumerate(totals)]
        return LocalTrainResult(out, means, n_steps)


# --------------------------------------------------------------------------- inference


def _as_stacked(model: nn.Module, params: Union[Mapping[str, torch.Tensor], Sequence[Mapping[str, torch.Tensor]]]) -> Params:
    keys = set(model.state_dict().keys())
    stacked = dict(params) if isinstance(params, Mapping) else stack_params(params)
    if set(stacked) != keys:
        raise ValueError(
            f"params keys must be the model's state_dict keys; missing {sorted(keys - set(stacked))}, "
            f"unexpected {sorted(set(stacked) - keys)}"
        )
    sizes = {v.shape[0] for v in stacked.values()}
    if len(sizes) != 1:
        raise ValueError(f"stacked params differ in their leading (model) dimension: {sorted(sizes)}")
    return stacked


def _logits_many(model: nn.Module, stacked: Params, x: torch.Tensor, batch_size: int, vectorize: bool) -> torch.Tensor:
    """Logits ``(n_models, n, C)`` in eval mode, ``batch_size`` samples at a time."""
    m = next(iter(stacked.values())).shape[0]
    n = x.shape[0]
    if batch_size < 1:
        raise ValueError(f"batch_size(={batch_size}) must be >= 1")

    def one(p: Params, xb: torch.Tensor) -> torch.Tensor:
        return functional_call(model, p, (xb,))

    outs = []
    with _mode(model, False), torch.no_grad():
        many = vmap(one, in_dims=(0, None)) if vectorize else None
        for i in range(0, n, batch_size):
            xb = x[i : i + batch_size]
            if vectorize:
                outs.append(many(stacked, xb))
            else:
                outs.append(torch.stack([one({k: v[j] for k, v in stacked.items()}, xb) for j in range(m)]))
        if not outs:  # no samples: ask the model for its number of classes
            probe = one({k: v[0] for k, v in stacked.items()}, x[:0])
            return probe.new_zeros((m, 0, *probe.shape[1:]))
    return torch.cat(outs, dim=1)


def predict_proba(
    model: nn.Module,
    params: Union[Mapping[str, torch.Tensor], Sequence[Mapping[str, torch.Tensor]]],
    x: torch.Tensor,
    *,
    batch_size: int = 1024,
    vectorize: bool = True,
) -> torch.Tensor:
    """Softmax outputs ``(n_models, n, C)`` of several parameter sets on the same ``x`` (eval mode).

    ``params``: a list of state dicts, or one dict of tensors stacked along a
    leading model dimension (as :func:`stack_params` makes). Vectorised over
    the models with ``vmap`` (works for BatchNorm in eval mode and dropout,
    which is off); ``vectorize=False`` loops instead (same numbers).
    """
    stacked = _as_stacked(model, params)
    return F.softmax(_logits_many(model, stacked, x, batch_size, vectorize), dim=-1)


def evaluate(
    model: nn.Module,
    params_list: Sequence[Mapping[str, torch.Tensor]],
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int = 1024,
    *,
    vectorize: bool = True,
) -> list[float]:
    """Accuracy (fraction of argmax == y) of each parameter set on ``(x, y)``; NaN when ``x`` is empty."""
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y differ in length ({x.shape[0]} vs {y.shape[0]})")
    if not params_list:
        return []
    stacked = _as_stacked(model, params_list)
    if x.shape[0] == 0:
        return [float("nan")] * len(params_list)
    logits = _logits_many(model, stacked, x, batch_size, vectorize)
    correct = (logits.argmax(-1) == y.unsqueeze(0)).sum(1)
    return [float(c) / x.shape[0] for c in correct.tolist()]


# --------------------------------------------------------------------------- choice


def make_executor(name: str, device: torch.device | str = "cpu") -> SequentialExecutor | VmapExecutor:
    """Executor by name: "sequential", "vmap", or "auto" (vmap on a GPU, sequential on a CPU)."""
    if name == "auto":
        name = "vmap" if torch.device(device).type == "cuda" else "sequential"
    if name == "sequential":
        return SequentialExecutor()
    if name == "vmap":
        return VmapExecutor()
    raise ValueError(f"executor(={name!r}) must be one of 'auto', 'sequential', 'vmap'")
