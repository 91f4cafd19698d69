"""Data for the learning backend: on-disk benchmark loaders (``datasets``) and client splits (``partitions``).

Numpy only; nothing here imports torch. The registries of names: ``DATASETS`` and
``PARTITIONS``. See docs/data.md.
"""

from edgesim.learning.data.datasets import (
    DATASET_NAMES,
    DATASETS,
    Dataset,
    DatasetError,
    DatasetSpec,
    load_cifar,
    load_dataset,
    load_dbpedia,
    load_digits,
    load_idx,
    load_medmnist,
    load_mnist,
    make_synthetic,
    to_offsets,
)
from edgesim.learning.data.image_folder import load_image_folder  # registers "image_folder"
from edgesim.learning.data.npz import load_npz  # registers "npz"
from edgesim.learning.data.partitions import (
    FEDDURE_MODES,
    PARTITIONS,
    ClientSplit,
    DofedSizes,
    PartitionSpec,
    class_clusters,
    dirichlet_partition,
    dofed_sizes,
    feddure_partition,
    iid_partition,
    labels_at_server_partition,
    normal_partition,
    subset_partition,
)

__all__ = [
    "DATASET_NAMES", "DATASETS", "Dataset", "DatasetError", "DatasetSpec", "load_cifar", "load_dataset", "load_dbpedia", "load_digits",
    "load_idx", "load_image_folder", "load_medmnist", "load_npz", "load_mnist", "make_synthetic", "to_offsets",
    "FEDDURE_MODES", "PARTITIONS", "ClientSplit", "DofedSizes", "PartitionSpec", "class_clusters", "dirichlet_partition", "dofed_sizes",
    "feddure_partition", "iid_partition", "labels_at_server_partition", "normal_partition", "subset_partition",
]
