"""Functional optimizers and learning-rate schedules for local training.

Each optimizer is a frozen dataclass with two pure methods over dicts of
tensors (one client, or many stacked along a leading client dimension — the
arithmetic is element-wise, so the same code serves both executors):

- ``init(params) -> state``: the optimizer's state for fresh training;
- ``update(params, grads, state, step, lr_scale) -> (params, state)``: one
  step (``update_`` does the same in place, for private tensors); ``step`` counts from 0, ``lr_scale`` multiplies the learning rate
  (the schedule's factor at that step: a number, or one per stacked client).

:class:`SGD` performs the same operations in the same order as
``torch.optim.SGD`` (single-tensor path: weight decay added to the gradient,
momentum buffer = first gradient, dampening 0, optional Nesterov), so one
client's result is bit-identical to it (tested). :class:`Adam` follows
``torch.optim.Adam`` (bias-corrected moments, L2 weight decay added to the
gradient; Kingma & Ba, ICLR 2015, Algorithm 1) to float rounding.

:func:`ema_update` is one step of an exponential moving average of the weights (the evaluation model
FixMatch reports, Sohn et al., NeurIPS 2020, §4: decay 0.999 per step).

Schedules map a local step to a learning-rate factor: :class:`Constant`
(1) and :class:`Cosine` — FixMatch's ``cos(7π·s / (16·S))`` (Sohn et al.,
NeurIPS 2020, §4 and Appendix), with the cycle fraction 7/16 as an option.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Union

import torch

from edgesim.learning.config import OPTIMIZERS, SCHEDULES  # the scenario keys' names

Params = dict[str, torch.Tensor]
State = dict[str, Params]


def _check(name: str, value: float, low: float, high: float = math.inf, *, low_open: bool = False) -> None:
    ok = (value > low if low_open else value >= low) and value < high
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok:
        bound = f"({low}" if low_open else f"[{low}"
        raise ValueError(f"{name}(={value!r}) must be in {bound}, {high})")


def _descend(p: torch.Tensor, d: torch.Tensor, lr) -> torch.Tensor:
    """``p − lr·d``; ``lr`` a number, or a tensor of one rate per client (leading dimension of ``p``)."""
    if torch.is_tensor(lr):
        return p - lr.to(p.dtype).reshape(-1, *([1] * (p.dim() - 1))) * d
    return p.add(d, alpha=-lr)


def ema_update(ema: Params, params: Params, decay: float) -> Params:
    """One step of an exponential moving average of the weights, key by key (new tensors):

        ema ← decay·ema + (1 − decay)·params        (decay ∈ [0, 1), dimensionless)

    computed as ``torch.lerp(ema, params, 1 − decay)``, so decay 0 returns ``params`` exactly. FixMatch
    evaluates such an average of its model's weights, updated after every optimizer step with decay 0.999
    (Sohn et al., "FixMatch", NeurIPS 2020, §4 "Implementation details"; Polyak & Juditsky, SIAM J. Control
    Optim. 30(4), 1992, for averaging the iterates). ``ema``'s keys are the ones averaged; a tensor that is not
    floating point (a BatchNorm layer's batch counter) takes ``params``' value.
    """
    _check("decay", decay, 0.0, 1.0)
    return {k: (torch.lerp(v, params[k].to(v.dtype), 1.0 - decay) if v.is_floating_point() else params[k].clone())
            for k, v in ema.items()}


@dataclass(frozen=True)
class SGD:
    """SGD with optional (Nesterov) momentum and L2 weight decay, as ``torch.optim.SGD``.

    ``d = g + wd·p``; with momentum ``buf = d`` on the first step, else
    ``buf = μ·buf + d``; ``d = d + μ·buf`` (Nesterov) or ``d = buf``; then
    ``p ← p − lr·s·d`` with ``s`` the schedule factor.
    """

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    def __post_init__(self) -> None:
        _check("lr", self.lr, 0.0, low_open=True)
        _check("momentum", self.momentum, 0.0, 1.0)
        _check("weight_decay", self.weight_decay, 0.0)
        if self.nesterov and self.momentum == 0:
            raise ValueError("nesterov=True needs momentum > 0")

    def init(self, params: Mapping[str, torch.Tensor]) -> State:
        if self.momentum == 0:
            return {}
        return {"buf": {k: torch.zeros_like(v) for k, v in params.items()}}

    def update(self, params: Params, grads: Params, state: State, step: int, lr_scale: float = 1.0) -> tuple[Params, State]:
        lr = self.lr * lr_scale
        new_p, new_buf = {}, {}
        for k, p in params.items():
            d = grads[k]
            if self.weight_decay != 0:
                d = d.add(p, alpha=self.weight_decay)
            if self.momentum != 0:
                buf = d.detach().clone() if step == 0 else state["buf"][k].mul(self.momentum).add(d)
                new_buf[k] = buf
                d = d.add(buf, alpha=self.momentum) if self.nesterov else buf
            new_p[k] = _descend(p, d, lr)
        return new_p, ({"buf": new_buf} if self.momentum != 0 else {})

    def update_(self, params: Params, grads: Params, state: State, step: int, lr_scale: float = 1.0) -> State:
        """:meth:`update` in place on ``params`` (and the momentum buffers): the same operations, no new
        parameter tensors per step — for one client's private tensors (the sequential executor)."""
        lr = self.lr * lr_scale
        bufs = state.get("buf", {})
        for k, p in params.items():
            d = grads[k]
            if self.weight_decay != 0:
                d = d.add(p, alpha=self.weight_decay)
            if self.momentum != 0:
                if step == 0:
                    bufs[k] = d.detach().clone()
                else:
                    bufs[k].mul_(self.momentum).add_(d)
                d = d.add(bufs[k], alpha=self.momentum) if self.nesterov else bufs[k]
            p.add_(d, alpha=-lr)
        return {"buf": bufs} if self.momentum != 0 else {}


@dataclass(frozen=True)
class Adam:
    """Adam (Kingma & Ba 2015) as ``torch.optim.Adam``, L2 weight decay added to the gradient.

    ``m ← β1·m + (1−β1)·g``, ``v ← β2·v + (1−β2)·g²``,
    ``p ← p − lr·s · (m / (1−β1^t)) / (√(v / (1−β2^t)) + ε)`` with ``t = step + 1``.
    """

    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        _check("lr", self.lr, 0.0, low_open=True)
        _check("beta1", self.beta1, 0.0, 1.0)
        _check("beta2", self.beta2, 0.0, 1.0)
        _check("eps", self.eps, 0.0, low_open=True)
        _check("weight_decay", self.weight_decay, 0.0)

    def init(self, params: Mapping[str, torch.Tensor]) -> State:
        return {
            "m": {k: torch.zeros_like(v) for k, v in params.items()},
            "v": {k: torch.zeros_like(v) for k, v in params.items()},
        }

    def update(self, params: Params, grads: Params, state: State, step: int, lr_scale: float = 1.0) -> tuple[Params, State]:
        t = step + 1
        bc1 = 1.0 - self.beta1**t
        bc2_sqrt = math.sqrt(1.0 - self.beta2**t)
        lr = self.lr * lr_scale
        new_p, new_m, new_v = {}, {}, {}
        for k, p in params.items():
            g = grads[k]
            if self.weight_decay != 0:
                g = g.add(p, alpha=self.weight_decay)
            m = state["m"][k].lerp(g, 1.0 - self.beta1)
            v = state["v"][k].mul(self.beta2).addcmul(g, g.conj(), value=1.0 - self.beta2)
            denom = (v.sqrt() / bc2_sqrt).add(self.eps)
            new_p[k] = _descend(p, m / denom, lr / bc1) if torch.is_tensor(lr) else p.addcdiv(m, denom, value=-lr / bc1)
            new_m[k], new_v[k] = m, v
        return new_p, {"m": new_m, "v": new_v}

    def update_(self, params: Params, grads: Params, state: State, step: int, lr_scale: float = 1.0) -> State:
        """:meth:`update` in place on ``params`` and the moments (same operations as ``torch.optim.Adam``)."""
        t = step + 1
        bc1 = 1.0 - self.beta1**t
        bc2_sqrt = math.sqrt(1.0 - self.beta2**t)
        lr = self.lr * lr_scale
        for k, p in params.items():
            g = grads[k]
            if self.weight_decay != 0:
                g = g.add(p, alpha=self.weight_decay)
            m, v = state["m"][k], state["v"][k]
            m.lerp_(g, 1.0 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g.conj(), value=1.0 - self.beta2)
            p.addcdiv_(m, (v.sqrt() / bc2_sqrt).add_(self.eps), value=-lr / bc1)
        return state


Optimizer = Union[SGD, Adam]


@dataclass(frozen=True)
class Constant:
    """Learning-rate factor 1 at every step."""

    def factor(self, step: int, total_steps: int) -> float:
        return 1.0


@dataclass(frozen=True)
class Cosine:
    """FixMatch's cosine decay: ``cos(π·cycles·s / S)`` over the ``S`` local steps of a round.

    ``cycles = 7/16`` (FixMatch's default) ends at cos(7π/16) ≈ 0.195 of the
    base rate; ``cycles = 0.5`` decays to 0.
    """

    cycles: float = 7.0 / 16.0

    def __post_init__(self) -> None:
        _check("cycles", self.cycles, 0.0, 0.5 + 1e-12, low_open=True)

    def factor(self, step: int, total_steps: int) -> float:
        if total_steps <= 0:
            return 1.0
        return math.cos(math.pi * self.cycles * step / total_steps)


Schedule = Union[Constant, Cosine]



def make_optimizer(name: str, lr: float, *, momentum: float = 0.0, weight_decay: float = 0.0,
                   nesterov: bool = False, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> Optimizer:
    """An optimizer by name (``"sgd"`` or ``"adam"``)."""
    if name == "sgd":
        return SGD(float(lr), float(momentum), float(weight_decay), bool(nesterov))
    if name == "adam":
        return Adam(float(lr), float(betas[0]), float(betas[1]), float(eps), float(weight_decay))
    raise ValueError(f"optimizer(={name!r}) must be one of {', '.join(map(repr, OPTIMIZERS))}")


def make_schedule(name: str) -> Schedule:
    """A schedule by name (``"constant"`` or ``"cosine"``)."""
    if name == "constant":
        return Constant()
    if name == "cosine":
        return Cosine()
    raise ValueError(f"schedule(={name!r}) must be one of {', '.join(map(repr, SCHEDULES))}")
