"""The papers' models, built by name, with their size in bits and their cost in FLOPs.

- :class:`DoFedCNN` — DoFed-SPP's image model (docs/studies/dofed_spp.md, our reading
  matching the paper's "two conv + two linear, ≈2.1 MB": 545,098 parameters
  for 3×32×32 and 10 classes).
- :class:`PeerCNN` — the peer benchmark's CNN (bench/peers/fl_workload.py,
  466,122 parameters), to compare speed with Flower and the bare loop.
- :class:`TextClassifier` — the torchtext tutorial model (§1.5, DBPedia):
  ``EmbeddingBag(V, 64, mean)`` + ``Linear(64, 14)``, weights U(±0.5), bias 0.
- :class:`ResNet9` — UM-pFSSL's model (§2.5) with MC-dropout; its
  predictions over T passes (Eqs. 9–10) are :func:`edgesim.learning.inference.mc_dropout_proba`.

Names and input kinds live in the torch-free :data:`edgesim.learning.model_specs.MODELS`;
its entries name the ``build_*`` functions below, which :func:`build_model` calls.

Randomness is explicit: :func:`build_model` takes a ``seed`` and initialises
under a forked RNG (global state untouched). :func:`model_bits` is what the simulator uploads per model;
:func:`flops_per_sample` is what it turns into CPU cycles.
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from edgesim.learning.layers import BatchNorm2d, Dropout, max_pool2d, name_layers
from edgesim.learning.model_specs import MODELS

MODEL_NAMES = MODELS.names  # the registry's names (edgesim.learning.model_specs), kept for callers

_DROPOUT_TYPES = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


def _hw(image_size: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    h, w = (int(v) for v in image_size)
    if h < 1 or w < 1:
        raise ValueError(f"image_size(={image_size}) must be positive")
    return h, w


class DoFedCNN(nn.Module):
    """Conv(c,32,3,p1)-ReLU-MaxPool2 → Conv(32,64,3,p1)-ReLU-MaxPool2 → Linear(64·⌊s/4⌋²,128)-ReLU → Linear(128,C).

    3×32×32, C=10: 545,098 parameters (docs/studies/dofed_spp.md). 1×28×28 → 7×7 and
    1×8×8 → 2×2 feature maps before the first Linear.

    Each block computes ``relu(max_pool(conv(x)))``: ReLU is monotone, so ``max_i relu(a_i) = relu(max_i a_i)``
    exactly, and the gradient is the same bit for bit (a window whose maximum is positive sends it to the
    same first arg-max either way; one whose maximum is ≤ 0 sends 0 either way); the element-wise ReLU and its
    backward then run on the pooled quarter of the elements; without a gradient, an NCHW map is pooled by
    torch's faster channels-last kernel (:func:`edgesim.learning.layers.max_pool2d`, the same values). Both:
    docs/model/numerics.md, "Where the time goes".
    """

    def __init__(self, in_channels: int, image_size: int | tuple[int, int], n_classes: int, dropout: float = 0.0,
                 conv_dropout: float = 0.0) -> None:
        """``dropout``: Dropout(p) after the hidden linear layer; ``conv_dropout``: Dropout(p) on the last
        conv block's pooled maps (before the first Linear); 0 leaves a layer out."""
        super().__init__()
        h, w = _hw(image_size)
        if h < 4 or w < 4:
            raise ValueError(f"image_size(={image_size}) must be >= 4 (two 2x2 max-pools)")
        for name, p in (("dropout", dropout), ("conv_dropout", conv_dropout)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name}(={p}) must be in [0, 1)")
        self.conv1 = nn.Conv2d(in_channels, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv_drop = Dropout(conv_dropout) if conv_dropout > 0 else None
        self.fc1 = nn.Linear(64 * (h // 4) * (w // 4), 128)
        self.drop = Dropout(dropout) if dropout > 0 else None
        self.fc2 = nn.Linear(128, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # max-pool, then ReLU: the same values and gradients as ReLU then max-pool, bit for bit (docstring), on a
        # quarter of the elements
        x = F.relu(max_pool2d(self.conv1(x), 2))
        x = F.relu(max_pool2d(self.conv2(x), 2))
        if self.conv_drop is not None:
            x = self.conv_drop(x)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(self.drop(x) if self.drop is not None else x)


class PeerCNN(nn.Module):
    """The peer benchmark's conv(3,32,5)-pool-conv(32,64,5)-pool-fc(1600,256)-fc(256,C).

    Defaults give exactly bench/peers/fl_workload.py's ``Net`` (466,122
    parameters, same parameter names); ``in_channels``/``image_size`` only
    resize the first conv and fc1 for other inputs. ``widths`` = (conv1,
    conv2, fc1) channels: ``small_cnn`` is (8, 16, 64), LeNet-5's shape made
    narrower — 1×28×28 → 4×4 maps, 20,522 parameters and 1.79 MFLOPs per
    training sample for C = 10, a fourteenth of :class:`DoFedCNN`, for runs
    of many algorithms on a shared CPU.
    """

    def __init__(self, n_classes: int = 10, in_channels: int = 3, image_size: int | tuple[int, int] = 32,
                 widths: tuple[int, int, int] = (32, 64, 256)) -> None:
        super().__init__()
        h, w = _hw(image_size)
        fh, fw = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2
        if fh < 1 or fw < 1:
            raise ValueError(f"image_size(={image_size}) must be >= 14 (two 5x5 convs and two pools)")
        c1, c2, hidden = widths
        self.conv1 = nn.Conv2d(in_channels, c1, 5)
        self.conv2 = nn.Conv2d(c1, c2, 5)
        self.fc1 = nn.Linear(c2 * fh * fw, hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


class TextClassifier(nn.Module):
    """``EmbeddingBag(V, D, mode="mean", padding_idx=0)`` + ``Linear(D, C)`` (torchtext tutorial).

    Input: a padded ``(batch, length)`` int64 token matrix; token 0 is padding
    and is left out of each row's mean (a row of only padding embeds to 0).
    Init as the tutorial: embedding and fc weights U(−0.5, 0.5), fc bias 0; the
    padding row is then zeroed (it never enters a mean and gets no gradient).
    """

    input_dtype = torch.long

    def __init__(self, vocab_size: int, embed_dim: int = 64, n_classes: int = 14) -> None:
        super().__init__()
        if vocab_size < 2:
            raise ValueError(f"vocab_size(={vocab_size}) must be >= 2 (token 0 is padding)")
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, mode="mean", padding_idx=0)
        self.fc = nn.Linear(embed_dim, n_classes)
        init_range = 0.5
        with torch.no_grad():
            self.embedding.weight.uniform_(-init_range, init_range)
            self.embedding.weight[0].zero_()
            self.fc.weight.uniform_(-init_range, init_range)
            self.fc.bias.zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embedding(tokens))


def _conv_bn(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class _Residual(nn.Module):
    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class GlobalMaxPool(nn.Module):
    """``AdaptiveMaxPool2d(1)`` as ``amax`` over the spatial dimensions: the same values, and a backward pass
    that is deterministic on a GPU (adaptive max pooling's CUDA backward is not)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.amax(dim=(-2, -1), keepdim=True)


class ResNet9(nn.Module):
    """ResNet-9 (UM-pFSSL's model; FedMatch/FedDure layout; docs/extend/executors.md).

    prep conv-BN-ReLU 64 → layer1 128 + MaxPool2 + residual(2×128) → layer2 256
    + MaxPool2 → layer3 512 + MaxPool2 + residual(2×512, each conv-BN-ReLU
    followed by Dropout(p)) → global max pool → Linear(512, C). Convolutions
    have no bias (BatchNorm follows). BatchNorm and dropout are
    ``edgesim.learning.layers``' (torch's, runnable functionally by the executors). The global max pool equals the paper's
    MaxPool(4) on 32×32 inputs and also serves 28×28.
    """

    def __init__(self, in_channels: int, n_classes: int, dropout: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout(={dropout}) must be in [0, 1)")
        self.prep = _conv_bn(in_channels, 64)
        self.layer1 = nn.Sequential(_conv_bn(64, 128), nn.MaxPool2d(2))
        self.res1 = _Residual(nn.Sequential(_conv_bn(128, 128), _conv_bn(128, 128)))
        self.layer2 = nn.Sequential(_conv_bn(128, 256), nn.MaxPool2d(2))
        self.layer3 = nn.Sequential(_conv_bn(256, 512), nn.MaxPool2d(2))
        self.res3 = _Residual(
            nn.Sequential(_conv_bn(512, 512), Dropout(dropout), _conv_bn(512, 512), Dropout(dropout))
        )
        self.pool = GlobalMaxPool()
        self.fc = nn.Linear(512, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.res1(self.layer1(self.prep(x)))
        x = self.res3(self.layer3(self.layer2(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


# --------------------------------------------------------------------------- randomness


@contextlib.contextmanager
def seeded_torch_rng(seed: int, device: torch.device | str | None = None) -> Iterator[None]:
    """Run a block with torch's global RNG (CPU, and ``device``'s if CUDA) seeded to ``seed``.

    The previous RNG state is restored on exit, so nothing leaks: this is how
    code that draws from the global RNG (``nn.Dropout``, ``nn.init``) is made to
    draw from an explicit, derived seed instead.
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    cuda = device.type == "cuda"
    idx = (device.index if device.index is not None else torch.cuda.current_device()) if cuda else None
    with torch.random.fork_rng(devices=[idx] if cuda else [], device_type="cuda"):
        torch.default_generator.manual_seed(seed)
        if cuda:
            with torch.cuda.device(idx):
                torch.cuda.manual_seed(seed)
        yield


def draw_seed(generator: torch.Generator) -> int:
    """One non-negative int63 seed drawn from ``generator`` (advances it by one draw)."""
    return int(torch.randint(0, 2**62, (1,), generator=generator).item())


def stochastic_modules(model: nn.Module) -> list[str]:
    """Names of the modules whose training-mode forward draws random numbers (dropout)."""
    return [n for n, m in model.named_modules() if isinstance(m, _DROPOUT_TYPES)]


# --------------------------------------------------------------------------- build & size
# Builders named by edgesim.learning.model_specs.MODELS: (input_shape, n_classes, vocab_size) -> nn.Module.


def build_cnn(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """``cnn``: :class:`DoFedCNN` for ``(C, H, W)`` inputs."""
    return DoFedCNN(shape[0], (shape[1], shape[2]), n_classes)


def build_cnn_mc(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """:class:`DoFedCNN` with Dropout(0.5) after its hidden linear layer (UM-pFSSL's MC-dropout rule on a CNN)."""
    return DoFedCNN(shape[0], (shape[1], shape[2]), n_classes, dropout=0.5)


def build_cnn_mc2(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """:class:`DoFedCNN` with dropout in two places, as UM-pFSSL's ResNet-9 (after its last two conv-BN layers;
    "and all FC layers except the output"): Dropout(0.25) on the last conv block's maps, Dropout(0.5) after
    the hidden linear layer. Same parameters as ``cnn_mc``."""
    return DoFedCNN(shape[0], (shape[1], shape[2]), n_classes, dropout=0.5, conv_dropout=0.25)


def build_small_cnn(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """``small_cnn``: a narrow :class:`PeerCNN` (widths 8, 16, 64) for ``(C, H, W)`` inputs (H, W >= 14)."""
    return PeerCNN(n_classes, shape[0], (shape[1], shape[2]), widths=(8, 16, 64))


def build_peer_cnn(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """``peer_cnn``: :class:`PeerCNN` resized to ``(C, H, W)`` inputs."""
    return PeerCNN(n_classes, in_channels=shape[0], image_size=(shape[1], shape[2]))


def build_text(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """``text``: :class:`TextClassifier` with ``vocab_size`` embedding rows."""
    return TextClassifier(int(vocab_size), n_classes=n_classes)


def build_resnet9(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """``resnet9``: :class:`ResNet9` for ``C`` input channels (any H, W)."""
    return ResNet9(shape[0], n_classes)


class MLP(nn.Module):
    """Flatten → Linear(C·H·W, hidden)-ReLU → Linear(hidden, classes): for feature vectors (an ``npz`` data set's
    ``(N, F)`` arrays arrive as ``(F, 1, 1)``, one channel per feature) and other inputs with no spatial structure."""

    def __init__(self, in_features: int, n_classes: int, hidden: int = 128) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def build_mlp(shape: tuple, n_classes: int, vocab_size: int | None = None) -> nn.Module:
    """``mlp``: :class:`MLP` over the flattened ``(C, H, W)`` input, 128 hidden units."""
    return MLP(math.prod(shape), n_classes)


def build_model(
    name: str,
    input_shape: tuple,
    n_classes: int,
    vocab_size: int | None = None,
    *,
    seed: int | None = None,
) -> nn.Module:
    """Model ``name`` (a name of :data:`edgesim.learning.model_specs.MODELS`) for inputs of ``input_shape``.

    ``input_shape`` is one sample's shape: ``(C, H, W)`` for image models,
    ``(length,)`` for text models (which also need ``vocab_size``). With ``seed``
    the initial weights are a function of the seed (global RNG untouched);
    without it they come from torch's global RNG.
    """
    spec = MODELS.lookup(name)
    if n_classes < 2:
        raise ValueError(f"n_classes(={n_classes}) must be >= 2")
    shape = tuple(int(s) for s in input_shape)
    if spec.input == "text":
        if vocab_size is None:
            raise ValueError(f"model {name!r} needs vocab_size (got None)")
        if len(shape) != 1:
            raise ValueError(f"input_shape(={input_shape}) for {name!r} must be (length,)")
    elif len(shape) != 3:
        raise ValueError(f"input_shape(={input_shape}) for {name!r} must be (channels, height, width)")
    if seed is None:
        return name_layers(spec.build(shape, n_classes, vocab_size))
    with seeded_torch_rng(seed):
        return name_layers(spec.build(shape, n_classes, vocab_size))


def model_bits(model: nn.Module, bits_per_param: int = 32) -> int:
    """Bits to send one copy of ``model``: (parameters + floating-point buffers) × ``bits_per_param``.

    Floating-point buffers (BatchNorm running mean/var) are part of the model a
    client uploads in FedAvg, so they count; integer buffers such as
    ``num_batches_tracked`` are bookkeeping and do not.
    """
    from edgesim.learning.state import state_bits

    if bits_per_param < 1:
        raise ValueError(f"bits_per_param(={bits_per_param}) must be >= 1")
    return state_bits(model.state_dict(), bits_per_number=bits_per_param)


def flops_per_sample(model: nn.Module, input_shape: tuple) -> float:
    """Estimated FLOPs of one training sample (forward + backward) for ``input_shape``.

    One dummy forward (batch 1, eval mode, no grad) with hooks counts
    multiply-accumulates (MACs): conv ``out_elems·(c_in/groups)·k_h·k_w``, linear
    ``out_elems·in_features``. Forward = 2·MACs; backward = 2·MACs for the
    weight gradient + 2·MACs for the input gradient, except for a layer that
    reads the raw input (no gradient needed): ≈ 3× forward in total. An
    ``EmbeddingBag`` counts ``length·dim`` adds forward and again backward.
    Element-wise ops (ReLU, pooling, BN, loss) are ignored (a few %). For
    PeerCNN on 3×32×32 this is within 1% of torch's FlopCounterMode.
    """
    shape = tuple(int(s) for s in input_shape)
    param = next(iter(model.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    if any(isinstance(m, (nn.EmbeddingBag, nn.Embedding)) for m in model.modules()):
        x = torch.ones((1, *shape), dtype=torch.long, device=device)
    else:
        dtype = param.dtype if param is not None else torch.float32
        x = torch.zeros((1, *shape), dtype=dtype, device=device)
    total = [0.0]

    def conv_hook(m: nn.modules.conv._ConvNd, inp: tuple, out: torch.Tensor) -> None:
        macs = out.numel() / out.shape[0] * (m.in_channels // m.groups) * math.prod(m.kernel_size)
        total[0] += (4.0 if inp[0] is x else 6.0) * macs

    def linear_hook(m: nn.Linear, inp: tuple, out: torch.Tensor) -> None:
        macs = out.numel() / out.shape[0] * m.in_features
        total[0] += (4.0 if inp[0] is x else 6.0) * macs

    def bag_hook(m: nn.EmbeddingBag, inp: tuple, out: torch.Tensor) -> None:
        total[0] += 2.0 * inp[0].numel() / inp[0].shape[0] * m.embedding_dim

    handles = []
    for m in model.modules():
        if isinstance(m, nn.modules.conv._ConvNd):
            handles.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            handles.append(m.register_forward_hook(linear_hook))
        elif isinstance(m, nn.EmbeddingBag):
            handles.append(m.register_forward_hook(bag_hook))
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return total[0]
