"""Where the learning runs: one function that names the torch compute device.

The simulator (`edgesim/`) never sees this; only `learning/` places tensors.
"""

from __future__ import annotations

import torch

_CHOICES = ("auto", "cpu", "cuda")


def compute_device(prefer: str = "auto") -> torch.device:
    """The torch device to compute on.

    ``"auto"``: CUDA if a GPU is visible, else the CPU. ``"cpu"``: the CPU.
    ``"cuda"``: the (current) GPU; raises ``RuntimeError`` when none is visible
    rather than falling back silently.
    """
    if prefer not in _CHOICES:
        raise ValueError(f"prefer(={prefer!r}) must be one of {', '.join(map(repr, _CHOICES))}")
    if prefer == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if prefer == "cuda":
        raise RuntimeError(
            "prefer='cuda' but torch sees no CUDA device "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); "
            "use prefer='auto' or 'cpu'"
        )
    return torch.device("cpu")
