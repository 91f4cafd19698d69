"""The models by name: every ``[train] model``, its input kind and its builder (a ``ModelSpec`` each) — torch-free.

Scenario validation (``edgesim.learning.config``) reads the names from here without
importing torch, so each entry names its builder lazily as
``"edgesim.learning.models:build_NAME"`` (see :mod:`edgesim.learning.registry`); the builder
is imported, with torch, only when :func:`edgesim.learning.models.build_model` builds
the model. A builder takes ``(input_shape, n_classes, vocab_size)`` — one
sample's shape, ``(C, H, W)`` for ``input == "image"`` and ``(length,)`` for
``input == "text"`` (which also needs ``vocab_size``) — and returns an
``nn.Module``.

A new model: its class and ``build_NAME`` in :mod:`edgesim.learning.models`, and one
:class:`ModelSpec` line below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from edgesim.learning.registry import Registry, resolve


@dataclass(frozen=True)
class ModelSpec:
    """``name``: the scenario key's value; ``input``: "image" or "text"; ``builder``: "module:function";
    ``weight_layers``: its convolution, linear and embedding layers (LG-FedAvg's ``lg_global_layers``
    is checked against it without building the model; a test checks it against the built one)."""

    name: str
    input: str
    builder: str
    summary: str
    weight_layers: Optional[int] = None

    def __post_init__(self):
        if self.input not in ("image", "text"):
            raise ValueError(f"model {self.name!r}: input(={self.input!r}) must be 'image' or 'text'")

    @property
    def build(self) -> Callable:
        """The builder ``(input_shape, n_classes, vocab_size) -> nn.Module`` (imports torch)."""
        return resolve(self.builder)


MODELS = Registry("model")
for _spec in (
    ModelSpec("cnn", "image", "edgesim.learning.models:build_cnn", "DoFed-SPP's two-conv + two-linear CNN (DoFedCNN)", weight_layers=4),
    ModelSpec("cnn_mc", "image", "edgesim.learning.models:build_cnn_mc",
              "the CNN with Dropout(0.5) after its hidden linear layer (MC dropout at CPU scale)", weight_layers=4),
    ModelSpec("cnn_mc2", "image", "edgesim.learning.models:build_cnn_mc2",
              "the CNN with dropout in two places, as UM-pFSSL's model: 0.25 on the conv maps, 0.5 after the "
              "hidden linear layer", weight_layers=4),
    ModelSpec("small_cnn", "image", "edgesim.learning.models:build_small_cnn", "a narrow LeNet-shaped CNN for CPU-scale runs", weight_layers=4),
    ModelSpec("peer_cnn", "image", "edgesim.learning.models:build_peer_cnn", "the peer benchmark's CNN (PeerCNN)", weight_layers=4),
    ModelSpec("text", "text", "edgesim.learning.models:build_text", "EmbeddingBag + Linear text classifier (torchtext tutorial)", weight_layers=2),
    ModelSpec("resnet9", "image", "edgesim.learning.models:build_resnet9", "UM-pFSSL's ResNet-9 with MC dropout", weight_layers=9),
    ModelSpec("mlp", "image", "edgesim.learning.models:build_mlp",
              "a one-hidden-layer perceptron (128 units) for feature vectors (npz (N, F) arrays)", weight_layers=2),
):
    MODELS.add(_spec)
