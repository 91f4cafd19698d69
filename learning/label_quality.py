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

A method that labels inside its loss (FixMatch, UDA, FedMatch, FedMix,
FedDure: one batch at a time) carries the true labels in its unlabelled
stream under :data:`TRUTH` and adds :func:`batch_label_aux` to its loss's
aux values; the executor averages them over each device's steps, and
``edgesim.learning.algorithms.common.aux_metrics`` turns the device means into the two
columns with :func:`finish`. A method that labels a whole data set at once
(UM-pFSSL, DoFed-SPP) calls :func:`label_rates` per device and
:func:`round_label_metrics` on the list.

This is measurement, not part of any algorithm: it adds no forward pass (the
predictions are the ones the method made anyway), draws no random number
(the extra stream key changes no batch order or augmentation) and is not
charged on the simulated clock (docs/metrics.md).
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import torch

TRUTH = "y_true"
"""The batch key of the unlabelled rows' hidden true labels (only ever compared with, never trained on)."""

HITS, CORRECT, USED = "pl_hits", "pl_correct", "pl_used"


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


def finish(means: Mapping[str, float]) -> dict[str, float]:
    """Device means of ``pl_hits``/``pl_correct``/``pl_used`` (and any other aux) → the reported columns.

    ``pl_*`` keys are replaced by ``pseudo_label_accuracy`` = hits / used (left
    out when used = 0: no label was used, an empty cell in ``rounds.csv``) and
    ``pseudo_label_accuracy_all`` = correct; other keys pass.
    """
    out = {k: v for k, v in means.items() if k not in (HITS, CORRECT, USED)}
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
    means = {k: math.fsum(r[k] for r in rates) / len(rates) for k in (HITS, CORRECT, USED)}
    out = finish(means)
    if mask_rate:
        out["mask_rate"] = means[USED]
    return out
