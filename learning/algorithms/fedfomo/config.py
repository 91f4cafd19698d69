"""FedFomo's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.fedfomo.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass

from edgesim.config import check_choice, check_int, check_number, fail
from edgesim.learning.algorithms import ScenarioFacts, declare


@dataclass(frozen=True)
class FedFomoConfig:
    """``n_download``: M; ``epsilon``/``epsilon_decay``: ε-greedy; ``self_affinity``: P_i[i] at start;
    ``distance``: ``"l1"`` or ``"l2"``; ``validation``: ``"labeled"`` or ``"split"`` (``val_fraction`` held out);
    ``report_federated``: also report the metrics of the models right after the FedFomo update, before local
    training (``federated_accuracy``, ``federated_labeling_accuracy``; costs one more evaluation per round)."""

    n_download: int = 10
    epsilon: float = 0.3
    epsilon_decay: float = 0.05
    self_affinity: float = 0.1
    distance: str = "l1"
    validation: str = "labeled"
    val_fraction: float = 0.2
    report_federated: bool = False

    def __post_init__(self):
        check_int("n_download", self.n_download, 1)
        check_number("epsilon", self.epsilon, minimum=0)
        if self.epsilon > 1:
            raise ValueError(f"epsilon = {self.epsilon!r}: expected a probability in [0, 1]")
        check_number("epsilon_decay", self.epsilon_decay, minimum=0)
        check_number("self_affinity", self.self_affinity)
        check_choice("distance", self.distance, ("l1", "l2"))
        check_choice("validation", self.validation, ("labeled", "split"))
        check_number("val_fraction", self.val_fraction, minimum=0, strict=True)
        if self.val_fraction >= 1:
            raise ValueError(f"val_fraction = {self.val_fraction!r}: expected a fraction in (0, 1)")
        if not isinstance(self.report_federated, bool):
            raise ValueError(f"report_federated = {self.report_federated!r}: expected true or false")


def check_fedfomo(cfg: FedFomoConfig, facts: ScenarioFacts) -> None:
    """M models downloaded from the other devices: at most N - 1."""
    if cfg.n_download > facts.n_devices - 1:
        fail("n_download", cfg.n_download, f"at most n_devices - 1 = {facts.n_devices - 1} (the other devices' models)")


FedFomoConfig.COMPRESSION_REFUSED = (  # docs/model/compression.md
    "each device downloads other devices' models to weigh them on its validation data; not implemented")

declare("fedfomo", FedFomoConfig, module="edgesim.learning.algorithms.fedfomo.algorithm", display="FedFomo", check=check_fedfomo,
        summary="FedFomo: personalised first-order weighting of M downloaded models")
