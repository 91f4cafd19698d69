"""How good a method's pseudo-labels are: measured against the hidden true labels, never trained on.

Every pseudo-labelling method reports, per round, in ``rounds.csv``:

- ``pseudo_label_accuracy`` = mean_d(h_d) / mean_d(m_d): the share of the
  pseudo-labels a method *used* (after its confidence threshold, if any)
  that are right, where per device d ``h_d`` is the fraction of its
  pseudo-labelled rows that are used **and** right and ``m_d`` the fraction
  used (its mask rate; 1 without a threshold). Left out (an empty cell) when
  nothing was used.
- ``pseudo_label_accuracy_all`` = mean_d(c_d): the share right among all the
  rows the method labelled, used or not (``c_d``: fraction right).

Both are the method's *own* rule: scored against the model being trained, at
every local step, on the rows its loss draws. They compare different rows across
methods (FixMatch's "used" is its rows above its threshold, FedDure's is a
weight ≈ 0.5 on every row), so every pseudo-labelling method also reports three
figures by **one rule** (issue 54.1), measured on the model a device *starts the
round from* (the one it labels with at its first step) over **all** its
unlabelled rows, before any local step:

- ``start_label_accuracy`` = mean_d(a_d): the share of the rows whose arg-max is right;
- ``start_label_accuracy_confident`` = mean_d(h_d) / mean_d(s_d): the share right
  among the rows whose top softmax probability is ≥ :data:`REFERENCE_CONFIDENCE`
  (0.95, FixMatch's τ in Sohn et al. 2020 and in FedDure's Table 1 baselines: a
  fixed reference, the same for every method whatever its own threshold); left
  out (an empty cell) when no row reaches it;
- ``start_label_confident_share`` = mean_d(s_d): the share of the rows above it.

(per device d: ``a_d`` fraction right, ``s_d`` fraction at or above the
reference, ``h_d`` fraction at or above it **and** right; :func:`start_label_rates`.)
The executor-side methods get them from
``edgesim.learning.algorithms.common.train_devices`` (one eval-mode forward pass of
the start model; no draw, no simulated time); the whole-data-set labellers
(UM-pFSSL: the helpers' weighted average a device starts from; DoFed-SPP: the
device's own target model) add ``common.start_label_rates_of`` to their
:func:`label_rates` per device.

A method that labels inside its loss (FixMatch, UDA, FedMatch, FedMix,
FedDure: one batch at a time) carries the true labels in its unlabelled
stream under :data:`TRUTH` and adds :func:`batch_label_aux` to its loss's
aux values; the executor averages them over each device's steps, and
``edgesim.learning.algorithms.common.aux_metrics`` turns the device means into the two
columns with :func:`finish`. A method that labels a whole data set at once
(UM-pFSSL, DoFed-SPP) calls :func:`label_rates` per device and
:func:`round_label_metrics` on the list.

This is measurement, not part of any algorithm: the method's own figures add no
forward pass (the predictions are the ones the method made anyway), the one-rule
figures one eval-mode pass of the start model per device; neither draws a random number
(the extra stream key changes no batch order or augmentation) and is not
charged on the simulated clock (docs/use/metrics.md).
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import torch

TRUTH = "y_true"
"""The batch key of the unlabelled rows' hidden true labels (only ever compared with, never trained on)."""

HITS, CORRECT, USED = "pl_hits", "pl_correct", "pl_used"

REFERENCE_CONFIDENCE = 0.95
"""The fixed confidence (top softmax probability) the one-rule figures split rows at (module docstring)."""

START_RIGHT, START_CONFIDENT, START_CONFIDENT_RIGHT = "pl_start_right", "pl_start_confident", "pl_start_confident_right"
START_KEYS = (START_RIGHT, START_CONFIDENT, START_CONFIDENT_RIGHT)


def batch_label_aux(b, pseudo: torch.Tensor, used: Optional[torch.Tensor], key: str) -> dict[str, torch.Tensor]:
    """Aux values of one batch's pseudo-labels ``pseudo`` (class indices of the rows of ``key``'s stream).

    ``used``: 1.0 for rows the loss trains on (``None``: all). Returns
    ``pl_hits`` = mean(used·[pseudo = y]), ``pl_correct`` = mean([pseudo = y])
    and ``pl_used`` = mean(used) over the real rows (``b.mean``), or ``{}`` when
    the batch carries no true labels (:data:`TRUTH`).
    """
    if TRUTH not in b:
        return {}
    correct = (pseudo.detach() == b[TRUTH]).to(torch.float32)
    u = torch.ones_like(correct) if used is None else used.detach().to(correct.dtype)
    return {HITS: b.mean(u * correct, key), CORRECT: b.mean(correct, key), USED: b.mean(u, key)}


def label_rates(pseudo: torch.Tensor, truth: torch.Tensor, used: Optional[torch.Tensor] = None) -> dict[str, float]:
    """One device's ``pl_hits``, ``pl_correct``, ``pl_used`` (fractions of its ``n`` rows) or ``{}`` if n = 0.

    ``pseudo``: class indices ``(n,)`` or soft labels ``(n, C)`` (their arg-max);
    ``truth``: ``(n,)``; ``used``: ``(n,)`` booleans or 0/1 (``None``: all).
    """
    if pseudo.dim() == 2:
        pseudo = pseudo.argmax(-1)
    n = truth.shape[0]
    if pseudo.shape != (n,):
        raise ValueError(f"pseudo(shape={tuple(pseudo.shape)}) must be ({n},), one label per true label")
    if n == 0:
        return {}
    correct = (pseudo == truth).to(torch.float64)
    u = torch.ones_like(correct) if used is None else used.to(torch.float64)
    return {HITS: float((u * correct).mean()), CORRECT: float(correct.mean()), USED: float(u.mean())}


def start_label_rates(probs: torch.Tensor, truth: torch.Tensor,
                      reference: float = REFERENCE_CONFIDENCE) -> dict[str, float]:
    """One device's one-rule tallies from its start model's softmax ``probs`` ``(n, C)`` on its ``n`` unlabelled rows.

    ``pl_start_right`` = mean([argmax p = y]), ``pl_start_confident`` = mean([max p ≥ reference]),
    ``pl_start_confident_right`` = mean([max p ≥ reference]·[argmax p = y]) (fractions of n); ``{}`` if n = 0.
    """
    n = truth.shape[0]
    if probs.dim() != 2 or probs.shape[0] != n:
        raise ValueError(f"probs(shape={tuple(probs.shape)}) must be ({n}, C), one row per true label")
    if n == 0:
        return {}
    top, pred = probs.max(-1)
    right = (pred == truth).to(torch.float64)
    confident = (top >= reference).to(torch.float64)
    return {START_RIGHT: float(right.mean()), START_CONFIDENT: float(confident.mean()),
            START_CONFIDENT_RIGHT: float((right * confident).mean())}


def finish(means: Mapping[str, float]) -> dict[str, float]:
    """Device means of ``pl_hits``/``pl_correct``/``pl_used`` (and any other aux) → the reported columns.

    ``pl_*`` keys are replaced by ``pseudo_label_accuracy`` = hits / used (left
    out when used = 0: no label was used, an empty cell in ``rounds.csv``) and
    ``pseudo_label_accuracy_all`` = correct; the ``pl_start_*`` keys (:func:`start_label_rates`) by
    ``start_label_accuracy`` = right, ``start_label_confident_share`` = confident and
    ``start_label_accuracy_confident`` = confident-right / confident (left out when no row is confident);
    other keys pass.
    """
    out = {k: v for k, v in means.items() if k not in (HITS, CORRECT, USED, *START_KEYS)}
    if START_RIGHT in means:
        out["start_label_accuracy"] = means[START_RIGHT]
    if START_CONFIDENT in means:
        out["start_label_confident_share"] = means[START_CONFIDENT]
        if means[START_CONFIDENT] > 0 and START_CONFIDENT_RIGHT in means:
            out["start_label_accuracy_confident"] = means[START_CONFIDENT_RIGHT] / means[START_CONFIDENT]
    if HITS in means and USED in means and means[USED] > 0:
        out["pseudo_label_accuracy"] = means[HITS] / means[USED]
    if CORRECT in means:
        out["pseudo_label_accuracy_all"] = means[CORRECT]
    return out


def round_label_metrics(rates: Sequence[Mapping[str, float]], mask_rate: bool = False) -> dict[str, float]:
    """A round's columns from the devices' :func:`label_rates` (devices without rows skipped; ``{}`` if none).

    ``mask_rate``: also report ``mask_rate`` = mean_d(m_d) (methods with a threshold).
    """
    rates = [r for r in rates if r]
    if not rates:
        return {}
    means = {k: math.fsum(r[k] for r in rates) / len(rates) for k in (HITS, CORRECT, USED, *START_KEYS)
             if all(k in r for r in rates)}
    out = finish(means)
    if mask_rate and USED in means:
        out["mask_rate"] = means[USED]
    return out
