"""The data sets by name: each one's :class:`DatasetSpec` in :data:`DATASETS`, and :func:`load_dataset`.

The loaders read the files their authors publish, one module per on-disk
format: IDX (MNIST, Fashion-MNIST; :mod:`~edgesim.learning.data.idx`), CIFAR
python pickles (:mod:`~edgesim.learning.data.cifar`), CINIC-10's PNG folders
(:mod:`~edgesim.learning.data.cinic`), MedMNIST ``.npz``
(:mod:`~edgesim.learning.data.medmnist`), the DBPedia ontology CSV
(:mod:`~edgesim.learning.data.dbpedia`, tokens by :mod:`~edgesim.learning.data.tokens`),
scikit-learn's bundled digits (:mod:`~edgesim.learning.data.digits`), a
synthetic generator (:mod:`~edgesim.learning.data.synthetic`) and a user's own
files (:mod:`~edgesim.learning.data.npz`, :mod:`~edgesim.learning.data.image_folder`).
Which paper uses which: DoFed-SPP §6.1 (CIFAR-10, CIFAR-100, DBPedia), UM-pFSSL §V
(Fashion-MNIST, CIFAR-10, MedMNIST), FedMix (CIFAR-10), FedDure §4.1 (CIFAR-10,
Fashion-MNIST). Nothing is downloaded.

Each returns a :class:`~edgesim.learning.data.dataset.Dataset` (images float32
``(n, c, h, w)`` normalised per channel with the train split's statistics;
text int64 token ids; labels int64). :data:`DATASETS` is the single source of
the names: ``edgesim.learning.config`` validates against it and
:func:`load_dataset` looks the loader up in it. Every module here is numpy
only, so the registry is importable without torch (``edgesim plan``).

Every missing, corrupt or malformed file raises :class:`DatasetError` naming
the file and what was expected. Formats, checksums and the choices made where
the sources are silent: ``docs/use/data.md``.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from edgesim.learning.data.cifar import load_cifar
from edgesim.learning.data.cinic import load_cinic10
from edgesim.learning.data.dataset import Dataset, DatasetError
from edgesim.learning.data.dbpedia import load_dbpedia
from edgesim.learning.data.digits import load_digits
from edgesim.learning.data.idx import load_mnist
from edgesim.learning.data.image_folder import load_image_folder
from edgesim.learning.data.medmnist import MEDMNIST, MEDMNIST_TITLES, load_medmnist
from edgesim.learning.data.npz import load_npz
from edgesim.learning.data.synthetic import make_synthetic
from edgesim.learning.registry import Registry

__all__ = ["DATASETS", "DATASET_NAMES", "Dataset", "DatasetError", "DatasetSpec", "load_dataset"]


@dataclass(frozen=True)
class DatasetSpec:
    """One ``[data] dataset`` name: its loader ``load(data_dir, **options) -> Dataset`` and metadata.

    ``title``: how the papers write the name; ``kind``: "image" or "text";
    ``needs_files``: whether ``data_dir`` is required; ``options``: the
    keyword options :func:`load_dataset` passes on to the loader;
    ``n_classes``: the class count, known without the files (``None`` where an
    option sets it), so that ``edgesim plan`` needs no data.
    ``hflip_preserves_labels``: whether a left–right mirror of an image keeps its
    label. A mirrored digit is not the same digit (FixMatch, Sohn et al. 2020,
    §2.3, drops the flip for SVHN), OrganMNIST names left and right organs and
    random Gaussian blobs have no symmetry: ``False`` for those; natural images
    (CIFAR, CINIC-10, Fashion-MNIST's garments) ``True``. ``weak``/``strong``
    views and FedMix's perturbations flip only where it is ``True``
    (:func:`edgesim.learning.augment.make_augmentation`). Its default is ``False``: a data set nothing is
    known about (``npz``, ``image_folder``, a plugin's) is never mirrored unless the scenario says
    ``[data] hflip = true`` (which overrides this rule either way).
    """

    name: str
    title: str
    kind: str
    load: Callable[..., Dataset]
    needs_files: bool = True
    options: tuple[str, ...] = ()
    n_classes: int | None = None
    hflip_preserves_labels: bool = False


def _load_medmnist_flag(data_dir, merge_val: bool = False, *, flag: str) -> Dataset:
    """The MedMNIST set ``flag`` (:func:`load_medmnist`); ``merge_val`` adds the official val split to the train pool
    (default: the train split only)."""
    return load_medmnist(data_dir, flag, merge_val)


DATASETS = Registry("dataset", error=DatasetError)
"""Every data set by name; the single source of the names (``edgesim.learning.config`` validates against it)."""

for _spec in (
    DatasetSpec("digits", "scikit-learn digits", "image", lambda d: load_digits(), needs_files=False, n_classes=10,
                hflip_preserves_labels=False),
    DatasetSpec("mnist", "MNIST", "image", lambda d: load_mnist(d, "mnist"), n_classes=10,
                hflip_preserves_labels=False),
    DatasetSpec("fashion_mnist", "Fashion-MNIST", "image", lambda d: load_mnist(d, "fashion_mnist"), n_classes=10,
                hflip_preserves_labels=True),
    DatasetSpec("cifar10", "CIFAR-10", "image", lambda d: load_cifar(d, 10), n_classes=10,
                hflip_preserves_labels=True),
    DatasetSpec("cifar100", "CIFAR-100", "image", lambda d: load_cifar(d, 100), n_classes=100,
                hflip_preserves_labels=True),
    DatasetSpec("cinic10", "CINIC-10", "image", load_cinic10, n_classes=10, hflip_preserves_labels=True),
    *(DatasetSpec(flag, MEDMNIST_TITLES[flag], "image", partial(_load_medmnist_flag, flag=flag), options=("merge_val",),
                  n_classes=MEDMNIST[flag][0], hflip_preserves_labels=not flag.startswith("organ"))
      for flag in MEDMNIST),
    DatasetSpec("dbpedia", "DBPedia", "text", load_dbpedia, options=("vocab_size", "max_len"), n_classes=14,
                hflip_preserves_labels=True),
    DatasetSpec("synthetic", "synthetic Gaussian blobs", "image", lambda d, **o: make_synthetic(**o), needs_files=False,
                options=("n_train", "n_test", "shape", "n_classes", "seed", "noise_std"), hflip_preserves_labels=False),
    DatasetSpec("image_folder", "your images, one folder per class", "image", load_image_folder,
                options=("image_size", "test_fraction")),
    DatasetSpec("npz", "your arrays in one .npz file", "image", load_npz, options=("file",)),
):
    DATASETS.add(_spec)
DATASET_NAMES = DATASETS.names  # kept for callers


_LOADED: ContextVar[dict | None] = ContextVar("edgesim_loaded_datasets", default=None)


@contextmanager
def loaded_once():
    """Within it, :func:`load_dataset` reads each data set once: a second call with the same name, folder and
    options returns the first call's :class:`Dataset` (the same object: its arrays are shared, never to be
    written). A run is one such scope (:func:`edgesim.scenarios.run.run_scenario`: its plan, its sizing and
    its context each ask for the data set; Fashion-MNIST is ~0.8 s a read). Nested scopes share the outer one;
    the data sets are let go when the outermost ends."""
    if _LOADED.get() is not None:
        yield
        return
    token = _LOADED.set({})
    try:
        yield
    finally:
        _LOADED.reset(token)


def load_dataset(name: str, data_dir: str | Path | None = None, **options) -> Dataset:
    """Load a data set by name; ``options`` go to its loader (e.g. ``vocab_size`` for dbpedia).

    Names: those of :data:`DATASETS` (digits, mnist, fashion_mnist, cifar10,
    cifar100, the MedMNIST flags, dbpedia, synthetic). Each call reads the files
    again, except within :func:`loaded_once`.
    """
    loaded = _LOADED.get()
    key = (name, None if data_dir is None else str(Path(data_dir).resolve()), repr(sorted(options.items())))
    if loaded is not None and key in loaded:
        return loaded[key]
    ds = _load(name, data_dir, **options)
    if loaded is not None:
        loaded[key] = ds
    return ds


def _load(name: str, data_dir: str | Path | None, **options) -> Dataset:
    spec = DATASETS.lookup(name)
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise DatasetError(f"unknown option(s) {', '.join(unknown)} for dataset {name!r}; "
                           f"expected: {', '.join(spec.options) if spec.options else 'none'}")
    if spec.needs_files and data_dir is None:
        raise DatasetError(f"dataset {name!r} needs files on disk: give their folder as ⟨data-dir⟩, "
                           "the EDGESIM_DATA environment variable, or the scenario key `data.data_dir`")
    return spec.load(data_dir, **options)
