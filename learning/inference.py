"""Inference over many models at once: logits, probabilities, accuracy and MC-dropout predictions.

Every function takes the model as a template (structure only; its own
tensors are not used) and parameters as a list of state dicts or one dict
stacked along a leading model dimension (:func:`edgesim.learning.state.stack_params`),
and runs all models in one ``vmap``'d call per batch of samples
(``vectorize=False``: a loop, same numbers; faster on a CPU for
convolutions). Nothing here changes any model's mode or tensors.

- :func:`logits` ``(n_models, n, C)`` in eval mode (BatchNorm on running
  statistics, dropout off), :func:`predict_proba` its softmax,
  :func:`evaluate` the accuracy of each model on ``(x, y)``.
- :func:`mc_dropout_proba`: UM-pFSSL's Eq. (9),
  ``P(y|x) = (1/T) Σ_t softmax(f_{ŵ_t}(x))``, over T stochastic passes with
  dropout on and BatchNorm in eval mode (Shi, Chen & Zhang, §4.2). The masks
  come from a key per (model, pass) and the sample's index
  (``edgesim.learning.layers``), so the result is the same whatever the batching and
  whether the models are vectorised or looped; :func:`entropy` is Eq. (10).
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Mapping, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, vmap

from edgesim.learning.layers import ForwardState, forward_state, mix64, name_layers
from edgesim.learning.state import Params, stack_params

ParamsLike = Union[Mapping[str, torch.Tensor], Sequence[Mapping[str, torch.Tensor]]]
_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


@contextlib.contextmanager
def eval_mode(model: nn.Module, dropout: bool = False) -> Iterator[nn.Module]:
    """Eval mode everywhere (``dropout=True``: dropout layers stay in training mode); modes restored after."""
    modes = {m: m.training for m in model.modules()}
    try:
        model.eval()
        if dropout:
            for m in model.modules():
                if isinstance(m, _DROPOUT):
                    m.train()
        yield model
    finally:
        for m, t in modes.items():
            m.training = t


def as_stacked(model: nn.Module, params: ParamsLike) -> Params:
    """``params`` as one stacked dict with exactly the model's state-dict keys (``ValueError`` otherwise)."""
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


def _batched(model: nn.Module, stacked: Params, x: torch.Tensor, batch_size: int, vectorize: bool,
             keys: torch.Tensor | None = None) -> torch.Tensor:
    """Outputs ``(n_models, n, C)``, ``batch_size`` samples at a time; ``keys`` ``(n_models,)``: keyed dropout."""
    if batch_size < 1:
        raise ValueError(f"batch_size(={batch_size}) must be >= 1")
    m, n = next(iter(stacked.values())).shape[0], x.shape[0]

    def one(p: Params, xb: torch.Tensor, key: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        with forward_state(ForwardState(key=key, rows=rows)):
            return functional_call(model, p, (xb,))

    many = vmap(one, in_dims=(0, None, 0, None)) if vectorize else None
    k = keys if keys is not None else torch.zeros(m, dtype=torch.int64, device=x.device)
    outs = []
    with torch.no_grad():
        for i in range(0, n, batch_size):
            xb = x[i:i + batch_size]
            rows = torch.arange(i, i + xb.shape[0], device=x.device)
            if vectorize:
                outs.append(many(stacked, xb, k, rows))
            else:
                outs.append(torch.stack([one({a: v[j] for a, v in stacked.items()}, xb, k[j], rows) for j in range(m)]))
        if not outs:  # no samples: ask the model for its number of classes
            probe = one({a: v[0] for a, v in stacked.items()}, x[:0], k[0], x.new_zeros(0, dtype=torch.long))
            return probe.new_zeros((m, 0, *probe.shape[1:]))
    return torch.cat(outs, dim=1)


def logits(model: nn.Module, params: ParamsLike, x: torch.Tensor, *, batch_size: int = 1024,
           vectorize: bool = True) -> torch.Tensor:
    """Eval-mode logits ``(n_models, n, C)`` of several parameter sets on the same ``x``."""
    stacked = as_stacked(model, params)
    with eval_mode(model):
        return _batched(model, stacked, x, batch_size, vectorize)


def predict_proba(model: nn.Module, params: ParamsLike, x: torch.Tensor, *, batch_size: int = 1024,
                  vectorize: bool = True) -> torch.Tensor:
    """Softmax outputs ``(n_models, n, C)`` of several parameter sets on the same ``x`` (eval mode)."""
    return F.softmax(logits(model, params, x, batch_size=batch_size, vectorize=vectorize), dim=-1)


def evaluate(model: nn.Module, params_list: Sequence[Mapping[str, torch.Tensor]], x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 1024, *, vectorize: bool = True) -> list[float]:
    """Accuracy (fraction of argmax == y) of each parameter set on ``(x, y)``; NaN when ``x`` is empty."""
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y differ in length ({x.shape[0]} vs {y.shape[0]})")
    if not params_list:
        return []
    if x.shape[0] == 0:
        as_stacked(model, params_list)
        return [float("nan")] * len(params_list)
    out = logits(model, params_list, x, batch_size=batch_size, vectorize=vectorize)
    correct = (out.argmax(-1) == y.unsqueeze(0)).sum(1)
    return [float(c) / x.shape[0] for c in correct.tolist()]


def paired_accuracy(model: nn.Module, params_list: Sequence[Mapping[str, torch.Tensor]],
                    parts: Sequence[tuple[torch.Tensor, torch.Tensor]], *, batch_size: int = 1024,
                    max_models: int | None = None) -> list[float]:
    """Accuracy of model i on its own ``parts[i] = (x_i, y_i)``, for every i: the models stacked and ``vmap``'d
    over their own rows (each set padded to the longest; padded rows are never counted), ``max_models`` at a time
    (``None``: all), ``batch_size`` rows of every set per call. Eval mode: a row's output depends on its model and
    itself only, so the counts are those of :func:`evaluate` model by model. NaN for an empty set."""
    if len(params_list) != len(parts):
        raise ValueError(f"{len(params_list)} models for {len(parts)} sets")
    out: list[float] = []
    step = max_models or max(1, len(parts))
    for g in range(0, len(parts), step):
        out += _paired_group(model, params_list[g:g + step], parts[g:g + step], batch_size)
    return out


def _paired_group(model, params_list, parts, batch_size: int) -> list[float]:
    sizes = [int(x.shape[0]) for x, _ in parts]
    width = max(sizes, default=0)
    if width == 0:
        return [float("nan")] * len(parts)
    stacked = as_stacked(model, params_list)
    x = torch.stack([torch.cat([xi, xi.new_zeros((width - n, *xi.shape[1:]))]) if n < width else xi
                     for (xi, _), n in zip(parts, sizes)])
    y = torch.stack([torch.cat([yi, yi.new_full((width - n,), -1)]) if n < width else yi
                     for (_, yi), n in zip(parts, sizes)])

    def one(p: Params, xb: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        with forward_state(ForwardState(key=torch.zeros((), dtype=torch.int64, device=xb.device), rows=rows)):
            return functional_call(model, p, (xb,))

    many = vmap(one, in_dims=(0, 0, None))
    correct = torch.zeros(len(parts), dtype=torch.int64, device=x.device)
    with eval_mode(model), torch.no_grad():
        for i in range(0, width, batch_size):
            xb, yb = x[:, i:i + batch_size], y[:, i:i + batch_size]
            rows = torch.arange(i, i + xb.shape[1], device=x.device)
            correct += (many(stacked, xb, rows).argmax(-1) == yb).sum(1)
    return [float(c) / n if n else float("nan") for c, n in zip(correct.tolist(), sizes)]


def mc_dropout_proba(model: nn.Module, params: ParamsLike, x: torch.Tensor, n_passes: int,
                     seed: Union[int, Sequence[int]], *, batch_size: int = 1024, vectorize: bool = True) -> torch.Tensor:
    """UM-pFSSL Eq. (9) for every model: mean softmax over ``n_passes`` MC-dropout passes, ``(n_models, n, C)``.

    Pass t of model j uses the dropout key ``mix64(seed, j, t)`` — or, with one
    seed per model, ``mix64(seed_j, t)``, so a model's passes do not depend on
    which other models share the call; BatchNorm uses running statistics. Same
    seed(s) ⇒ same result, for any ``batch_size`` and ``vectorize``.
    """
    if n_passes < 1:
        raise ValueError(f"n_passes(={n_passes}) must be >= 1")
    stacked = as_stacked(model, params)
    name_layers(model)
    m = next(iter(stacked.values())).shape[0]
    if isinstance(seed, int):
        base = mix64(torch.arange(m, dtype=torch.int64) + mix64(torch.tensor(int(seed), dtype=torch.int64)))
    else:
        if len(seed) != m:
            raise ValueError(f"{len(seed)} seeds for {m} models")
        base = mix64(torch.tensor([int(s) for s in seed], dtype=torch.int64))
    acc = None
    with eval_mode(model, dropout=True):
        for t in range(n_passes):
            keys = mix64(base * (t + 1) + t).to(x.device)
            p = F.softmax(_batched(model, stacked, x, batch_size, vectorize, keys), dim=-1)
            acc = p if acc is None else acc + p
    return acc / n_passes


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """``H = −Σ_c P log P`` over the last dimension (UM-pFSSL Eq. 10), in nats; 0·log 0 = 0."""
    return -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1)


# Names kept for the modules that used the executor's private helpers.
_as_stacked = as_stacked


def _logits_many(model: nn.Module, stacked: Params, x: torch.Tensor, batch_size: int, vectorize: bool) -> torch.Tensor:
    with eval_mode(model):
        return _batched(model, stacked, x, batch_size, vectorize)


def cross_entropy_losses(
    model: nn.Module,
    params: Union[Mapping[str, torch.Tensor], Sequence[Mapping[str, torch.Tensor]]],
    xs: Sequence[torch.Tensor],
    ys: Sequence[torch.Tensor],
    *,
    batch_size: int = 2048,
    vectorize: bool = True,
) -> torch.Tensor:
    """Mean cross-entropy of every model on every set: ``(n_models, n_sets)``, float64.

    One forward call over the stacked models and the concatenated sets (the
    logits of :func:`edgesim.learning.inference.logits`, so log-softmax
    stays exact). An empty set gives NaN.
    """
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys differ in length ({len(xs)} vs {len(ys)})")
    stacked = as_stacked(model, params)
    m = next(iter(stacked.values())).shape[0]
    sizes = [int(x.shape[0]) for x in xs]
    if sum(sizes) == 0:
        return torch.full((m, len(xs)), float("nan"), dtype=torch.float64)
    x = torch.cat(list(xs))
    y = torch.cat(list(ys))
    out = logits(model, stacked, x, batch_size=batch_size, vectorize=vectorize)  # (m, n, C)
    nll = -torch.log_softmax(out.double(), dim=-1).gather(-1, y.view(1, -1, 1).expand(m, -1, 1)).squeeze(-1)
    out = torch.full((m, len(xs)), float("nan"), dtype=torch.float64, device=nll.device)
    start = 0
    for j, k in enumerate(sizes):
        if k:
            out[:, j] = nll[:, start:start + k].mean(dim=1)
        start += k
    return out.cpu()
