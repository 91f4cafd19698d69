"""Data for the learning backend: the data sets by name (``datasets``), their loaders (one module per on-disk
format: ``idx``, ``cifar``, ``cinic``, ``medmnist``, ``dbpedia`` with ``tokens``, ``digits``, ``synthetic``, ``npz``,
``image_folder``; the container in ``dataset``, file reading in ``files``) and client splits (``partitions``).

Numpy only; nothing here imports torch. The registries of names: ``DATASETS`` and
``PARTITIONS``. See docs/use/data.md.
"""

from edgesim.learning.data.cifar import load_cifar
from edgesim.learning.data.dataset import Dataset, DatasetError
from edgesim.learning.data.datasets import DATASET_NAMES, DATASETS, DatasetSpec, load_dataset
from edgesim.learning.data.dbpedia import load_dbpedia
from edgesim.learning.data.digits import load_digits
from edgesim.learning.data.idx import load_idx, load_mnist
from edgesim.learning.data.image_folder import load_image_folder
from edgesim.learning.data.medmnist import load_medmnist
from edgesim.learning.data.npz import load_npz
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
from edgesim.learning.data.synthetic import make_synthetic
from edgesim.learning.data.tokens import to_offsets

__all__ = [
    "DATASET_NAMES", "DATASETS", "Dataset", "DatasetError", "DatasetSpec", "load_cifar", "load_dataset", "load_dbpedia", "load_digits",
    "load_idx", "load_image_folder", "load_medmnist", "load_npz", "load_mnist", "make_synthetic", "to_offsets",
    "FEDDURE_MODES", "PARTITIONS", "ClientSplit", "DofedSizes", "PartitionSpec", "class_clusters", "dirichlet_partition", "dofed_sizes",
    "feddure_partition", "iid_partition", "labels_at_server_partition", "normal_partition", "subset_partition",
]
