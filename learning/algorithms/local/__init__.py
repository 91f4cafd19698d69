"""local: Local training's options (none) (``config``, torch-free) and the algorithm (``algorithm``).

This file stays empty: importing the config must not import torch.
"""
