"""fedmatch: FedMatch's options (``config``, torch-free) and the algorithm (``algorithm``).

This file stays empty: importing the config must not import torch.
"""
