"""Supervised only's options (torch-free; the algorithm: :mod:`edgesim.learning.algorithms.server_only.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from edgesim.compression import SENDS_NOTHING
from edgesim.config import check_int, check_number
from edgesim.learning.algorithms import ScenarioFacts, declare


@dataclass(frozen=True)
class ServerOnlyConfig:
    """The server's training per round, as FedMix's σ step and FedMatch's (defaults: theirs).

    ``lambda_s``: the loss weight (λ_s·CE); ``server_epochs``/``server_batch_size``: passes over the
    labelled set per round and their batch; ``lr``: overrides ``[train] lr``.
    """

    lambda_s: float = 10.0
    server_epochs: int = 1
    server_batch_size: int = 100
    lr: Optional[float] = None

    def __post_init__(self):
        check_number("lambda_s", self.lambda_s, minimum=0)
        check_int("server_epochs", self.server_epochs, 1)
        check_int("server_batch_size", self.server_batch_size, 1)
        check_number("lr", self.lr, minimum=0, strict=True, allow_none=True)


def check_server_only(cfg: ServerOnlyConfig, facts: ScenarioFacts) -> None:
    from edgesim.learning.algorithms.fedmix.config import needs_server_labels

    needs_server_labels("server_only", facts)


ServerOnlyConfig.COMPRESSION = SENDS_NOTHING  # the devices send nothing (docs/model/compression.md)

declare("server_only", ServerOnlyConfig, module="edgesim.learning.algorithms.server_only.algorithm", display="Supervised only (server)",
        check=check_server_only,
        summary="Supervised only: the base station trains the model on its labelled set, no client takes part")
