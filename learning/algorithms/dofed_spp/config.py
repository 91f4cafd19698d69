"""DoFed-SPP's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.dofed_spp.algorithm`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Union

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import PlanningHook, declare

Bound = Union[str, float, int]
BOUND_MODES = ("empirical", "zero")
SELECTIONS = ("coverage", "literal")


def check_bound(name: str, value: Bound) -> Bound:
    """``"empirical"``, ``"zero"`` or a finite number >= 0; else ``ValueError`` naming ``name``."""
    if isinstance(value, str):
        if value not in BOUND_MODES:
            raise ValueError(f"{name} = {value!r}: expected 'empirical', 'zero' or a number >= 0")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} = {value!r}: expected 'empirical', 'zero' or a number >= 0")
    return float(value)


@dataclass(frozen=True)
class DofedSppConfig:
    """DoFed-SPP's options (docs/studies/dofed_spp.md).

    ``warmup_rounds``: L (Phase 0 trains L·I epochs). ``target_epochs``: epochs
    of the teacher–student step per round (default 10, measured in
    docs/studies/dofed_spp.md "The student"; the paper's Algorithm 2 uses I for both
    models). ``selection``: how Algorithm 1 picks the K uploaders —
    ``"coverage"`` (default, our choice: Algorithm 1 run at B_sel =
    min(``coverage_b``, B) so that the K uploads spread over the devices'
    needs, :mod:`edgesim.selection`) or ``"literal"`` (Algorithm 1 on
    objective (27) at the pair's own B, as the paper writes it).
    ``gamma``: γ of Eq. (19) (default: ``train.lr``). ``g1``/``g2``:
    ``"empirical"``, ``"zero"`` or a number (:mod:`edgesim.learning.algorithms.dofed_spp.similarity`).
    ``pca_rank_fraction``: rank of the BS's per-layer PCA as a fraction of
    full rank (1 = no downsizing). ``max_b``/``max_k``: caps on the examined
    (B, K) pairs (the paper's "K = B = 10"). ``vectorize``: ``"auto"`` (vmap
    over model stacks on a GPU, a loop on a CPU where vmap'd convolutions are
    slower), ``"on"``, ``"off"`` — same numbers either way.
    """

    warmup_rounds: int = 5
    target_epochs: int = 10
    selection: str = "coverage"
    coverage_b: int = 2
    gamma: Optional[float] = None
    g1: Union[str, float] = "empirical"
    g2: Union[str, float] = "empirical"
    pca_rank_fraction: float = 0.5
    max_b: Optional[int] = None
    max_k: Optional[int] = None
    vectorize: str = "auto"

    def target_cycles(self, cycles_per_sample: float, n_target: int) -> float:
        """Cycles of the target model's step in one round (Eq. 15): E_tar·C_tra·(|D_l| + |D_ul|).

        ``cycles_per_sample``: C_tra (cycles/sample); ``n_target``: |D_l| + |D_ul|
        (samples). The run and ``edgesim plan`` both charge this.
        """
        return float(self.target_epochs * cycles_per_sample * n_target)

    def __post_init__(self):
        check_int("warmup_rounds", self.warmup_rounds, 0)
        check_int("target_epochs", self.target_epochs, 1)
        check_choice("selection", self.selection, SELECTIONS)
        check_int("coverage_b", self.coverage_b, 1)
        if self.gamma is not None:
            check_number("gamma", self.gamma, minimum=0, strict=True)
        check_bound("g1", self.g1)
        check_bound("g2", self.g2)
        check_number("pca_rank_fraction", self.pca_rank_fraction, minimum=0, strict=True)
        if self.pca_rank_fraction > 1:
            fail("pca_rank_fraction", self.pca_rank_fraction, "a number in (0, 1]")
        for name in ("max_b", "max_k"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        check_choice("vectorize", self.vectorize, ("auto", "on", "off"))


def target_cycles_per_round(scenario, workload) -> Optional[float]:
    """Cycles a device spends each round on DoFed-SPP's target model (``DofedSppConfig.target_cycles``, Eq. 15).

    C_tra = the resolved ``workload.cycles_per_sample``; |D_l|, |D_ul| the
    target sets of the SUBSET/NORMAL split (``dofed_sizes``, the same on every
    device). Any other split draws the target sets from each device's own data: the plan's D
    (``workload.samples_per_device``) stands for them, as it does for the reciprocal model's training
    (issue 40: leaving the student out made the plan call feasible what no round was). Reads no data
    for a registered data set whose classes are known.
    """
    from edgesim.learning.data.datasets import DATASETS, load_dataset
    from edgesim.learning.data.partitions import dofed_sizes

    data = scenario.learning.data
    cfg = scenario.learning.options("dofed_spp")
    if data.partition not in ("subset", "normal"):
        return cfg.target_cycles(workload.cycles_per_sample, workload.samples_per_device)
    n_classes = DATASETS.lookup(data.dataset).n_classes
    if not n_classes:
        n_classes = load_dataset(data.dataset, data.data_dir, **data.loader_options()).n_classes
    sizes = dofed_sizes(n_classes, data.n_clusters, data.size_scale)
    return cfg.target_cycles(workload.cycles_per_sample, sizes.labeled + sizes.unlabeled)


PLANNING = PlanningHook(  # the (B, K) of Ineq. (26): C1/C2/C3, similarity ratios, pseudo-labels
    target_cycles=target_cycles_per_round, auto_fields=("sr_cycles", "pseudo_label_cycles_per_model"),
    auto_cycles="edgesim.learning.algorithms.dofed_spp.algorithm:auto_cycles")

DofedSppConfig.COMPRESSION_REFUSED = (  # docs/model/compression.md
    "its devices download B other devices' models as pseudo-labellers under a (B, K) planned on uncompressed bits "
    "(Ineq. 26); not implemented")

declare("dofed_spp", DofedSppConfig, planning=PLANNING, module="edgesim.learning.algorithms.dofed_spp.algorithm",
        display="DoFed-SPP", chooses_devices=True,  # Algorithm 1 picks the round's K devices and B pseudo-labellers
        summary="DoFed-SPP: reciprocal + target models, similarity ratios, B/K on the budget")
