"""Everything an algorithm needs for a run, built once: data on the compute device, the model, the executor.

Each client's data lives as tensors on the compute device (GPU when there is
one), gathered once from the partition's index arrays — no per-client
DataLoaders. Randomness is derived, never global: :meth:`Context.seed_for`
turns (run seed, round, client, stream) into an independent integer seed.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
import torch.nn as nn

from edgesim.config import ConfigError, WorkloadConfig
from edgesim.learning.config import DataConfig, RunConfig, TrainConfig
from edgesim.learning.data import partitions as P
from edgesim.learning.data.dataset import Dataset, DatasetError, dataset_record
from edgesim.learning.data.datasets import load_dataset
from edgesim.learning.device import compute_device
from edgesim.learning.executors import make_executor
from edgesim.learning.models import build_model, flops_per_sample, model_bits
from edgesim.learning.numerics import Numerics, bfloat16_unsupported

Params = dict[str, torch.Tensor]


@dataclass
class ClientData:
    """One device's tensors (on the compute device).

    ``x_sup``/``y_sup``: what a supervised learner trains on — the reciprocal
    train set and the labelled target set together (docs/studies/dofed_spp.md).
    ``x_train``/``y_train``: the reciprocal train set alone (DoFed-SPP).
    ``x_lab``/``y_lab``: labelled target data. ``x_unl``: unlabelled data;
    ``y_unl_hidden`` its true labels, used only to score pseudo-labels.
    ``x_test``/``y_test``: the device's test set.
    """

    x_sup: torch.Tensor
    y_sup: torch.Tensor
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_lab: torch.Tensor
    y_lab: torch.Tensor
    x_unl: torch.Tensor
    y_unl_hidden: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    split: P.ClientSplit = field(repr=False)


@dataclass
class Context:
    """The shared, read-only setting of one run (all algorithms of the run see the same one).

    ``server_x``/``server_y``: the server's labelled set (labels-at-server
    partitions). ``val_x``/``val_y``: the part of it held out for validation
    (``[data] server_validation``; None when nothing is held out). ``pool_x``/``pool_y``: the train-pool samples no device
    holds — where a server-side unlabelled set comes from (FedBE); their
    labels are for scoring only. ``data_mean``/``data_std``: the per-channel
    normalisation of image inputs (what pixel-space augmentations undo).
    ``hflip_preserves_labels``: whether the views may mirror an image left–right (``[data] hflip``, by default
    the data set's rule ``DatasetSpec.hflip_preserves_labels``); :meth:`augmentation` builds views that flip only
    then.
    ``start_state``: the model every algorithm starts from instead of a fresh
    initialisation (a warm start's result, :mod:`edgesim.scenarios.warm_start`).
    ``compression``: the algorithm's :class:`edgesim.compression.CompressionConfig`
    (``None``: nothing compressed; set per algorithm by the run, ``edgesim.learning.compression``).
    ``loss_log``: where the local training records each trained device's loss statistic for a
    ``[resources]`` scheduling policy (:class:`edgesim.learning.algorithms.common.LossLog`; ``None``:
    nothing is computed, the default run's path).
    ``measure``: which rounds and devices are evaluated (:class:`edgesim.learning.evaluation.Measure`, set by the
    run; ``None``: every device at every call).
    """

    seed: int
    data_cfg: DataConfig
    train_cfg: TrainConfig
    run_cfg: RunConfig
    workload: WorkloadConfig
    dataset_name: str
    n_classes: int
    input_shape: tuple
    vocab_size: Optional[int]
    device: torch.device
    clients: list
    model: nn.Module
    model_bits: int
    cycles_per_sample: float
    executor: object
    server_x: Optional[torch.Tensor] = None
    server_y: Optional[torch.Tensor] = None
    val_x: Optional[torch.Tensor] = None
    val_y: Optional[torch.Tensor] = None
    pool_x: Optional[torch.Tensor] = None
    pool_y: Optional[torch.Tensor] = None
    data_mean: Optional[tuple] = None
    data_std: Optional[tuple] = None
    data_record: Optional[dict] = None
    start_state: Optional[Params] = None
    compression: Optional[object] = None
    hflip_preserves_labels: bool = True
    loss_log: Optional[object] = None
    measure: Optional[object] = None

    @property
    def n_devices(self) -> int:
        return len(self.clients)

    @property
    def epochs(self) -> int:
        """I: the epochs a device trains per round (``workload.local_iterations``, Eq. 7's factor of C_tra·D).
        With per-device values (a list or a table) there is no one I: :meth:`epochs_of` is each device's, and only
        an algorithm that declares ``per_device_iterations`` runs (the scenario's check refuses the others)."""
        if self.workload.iterations_vary:
            raise ValueError(f"workload.local_iterations = {self.workload.local_iterations!r} differs by device: "
                             f"this algorithm reads one I (Context.epochs); expected Context.epochs_of(device)")
        return self.workload.local_iterations

    def epochs_of(self, device: int) -> int:
        """I_k: the epochs device ``device`` trains per round — ``workload.local_iterations`` as one number, a list
        or a table drawn once from the seed (:func:`edgesim.config.iterations_per_device`, the draw the clock's
        plan and ``edgesim plan`` use)."""
        if not self.workload.iterations_vary:
            return self.workload.local_iterations
        from edgesim.config import iterations_per_device

        cached = self.__dict__.get("_epochs_by_device")
        if cached is None or cached[0] is not self.workload:
            cached = (self.workload, tuple(int(i) for i in iterations_per_device(self.workload, self.n_devices,
                                                                                 self.seed)))
            self.__dict__["_epochs_by_device"] = cached
        return cached[1][int(device)]

    @property
    def per_device_epochs(self) -> bool:
        """Whether devices train different numbers of epochs (``workload.local_iterations`` a list or a table)."""
        return self.workload.iterations_vary

    def augmentation(self, name: str):
        """The registered augmentation ``name`` for this data set's images: its shape, normalisation and
        whether a mirror keeps its labels (:func:`edgesim.learning.augment.make_augmentation`)."""
        from edgesim.learning.augment import make_augmentation

        return make_augmentation(name, self.input_shape, self.data_mean, self.data_std, self.hflip_preserves_labels)

    def seed_for(self, *keys) -> int:
        """An integer seed derived from (run seed, *keys); strings are hashed stably (crc32)."""
        ints = [self.seed] + [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in keys]
        return int(np.random.SeedSequence(ints).generate_state(1, dtype=np.uint64)[0] >> 1)

    def rng(self, *keys) -> np.random.Generator:
        return np.random.default_rng(self.seed_for(*keys))

    def generator(self, *keys) -> torch.Generator:
        """A CPU torch generator for sample orders (same on every device type)."""
        return torch.Generator().manual_seed(self.seed_for(*keys))

    def init_state(self, *keys) -> Params:
        """A freshly initialised model state (params + buffers) on the device, seeded by ``keys``; without keys,
        a copy of ``start_state`` when the run has a warm start (every algorithm's common initial model)."""
        if not keys and self.start_state is not None:
            return {k: v.detach().to(self.device).clone() for k, v in self.start_state.items()}
        m = build_model(self.train_cfg.model, self.input_shape, self.n_classes, self.vocab_size, seed=self.seed_for("init", *keys))
        return {k: v.detach().to(self.device).clone() for k, v in m.state_dict().items()}

    def optimizer(self, **overrides):
        """The scenario's optimizer (``[train]``), with ``overrides`` (``None`` values ignored)."""
        from edgesim.learning.optim import make_optimizer

        t = self.train_cfg
        o = {k: v for k, v in overrides.items() if v is not None}
        return make_optimizer(
            o.get("optimizer", t.optimizer), o.get("lr", t.lr), momentum=o.get("momentum", t.momentum),
            weight_decay=o.get("weight_decay", t.weight_decay), nesterov=o.get("nesterov", t.nesterov),
        )

    def bits_of(self, keys) -> int:
        """Bits of sending ``keys`` of the model: their share of its numbers × ``model_bits``."""
        from edgesim.learning.state import scaled_bits

        return scaled_bits(self.template_state, keys, self.model_bits)

    @property
    def template_state(self) -> Params:
        return self.model.state_dict()


def training_numerics(train_cfg: TrainConfig) -> Numerics:
    """``[train]``'s precision and memory format; :class:`ConfigError` for bfloat16 where the hardware has none."""
    numerics = Numerics(train_cfg.precision, train_cfg.memory_format)
    if numerics.precision == "bfloat16":
        reason = bfloat16_unsupported(compute_device(train_cfg.device))
        if reason is not None:
            raise ConfigError(f'[train] precision = "bfloat16": {reason}; expected "float32" on this machine')
    return numerics


def make_partition(dataset: Dataset, cfg: DataConfig, n_devices: int, rng: np.random.Generator):
    """The clients' index sets (and the server's labelled indices, for labels-at-server).

    A lookup in :data:`edgesim.learning.data.partitions.PARTITIONS`: the entry's split
    gets the ``DataConfig`` fields it declares in ``reads``.
    """
    spec = P.PARTITIONS.lookup(cfg.partition)
    return spec.apply(dataset.y_train, dataset.y_test, n_devices, rng, dataset.n_classes, cfg)


def validation_indices(ds: Dataset, pool: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of ``size`` train samples of ``ds`` outside the train pool ``pool`` (uniform): a validation
    split that no device holds and that is not the test set."""
    rest = np.setdiff1d(np.arange(len(ds.y_train)), pool)
    if size > len(rest):
        raise ValueError(f"validation_size(={size}) exceeds the {len(rest)} training samples of {ds.name} outside "
                         f"the train pool of {len(pool)}; lower validation_size or train_pool_size")
    return np.sort(rng.choice(rest, size=size, replace=False))


def validation_like(test: np.ndarray, y_test: np.ndarray, y_val: np.ndarray, n_classes: int,
                    rng: np.random.Generator, what: str) -> np.ndarray:
    """A device's validation set: as many validation samples of each class as its test set ``test`` holds (indices
    into ``y_test``), drawn without replacement from the validation labels ``y_val``; sorted indices into them."""
    need = np.bincount(np.asarray(y_test)[test], minlength=n_classes)
    have = np.bincount(y_val, minlength=n_classes)
    short = [f"class {c}: needs {n}, has {h}" for c, (n, h) in enumerate(zip(need, have)) if n > h]
    if short:
        raise ValueError(f"validation_size: the validation split holds too few samples for {what} "
                         f"({', '.join(short)}); raise validation_size or lower test_size")
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(y_val == c), size=n, replace=False)
                                   for c, n in enumerate(need) if n] or [np.empty(0, np.int64)])).astype(np.int64)


def _gather(x: torch.Tensor, y: torch.Tensor, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.as_tensor(np.asarray(idx, dtype=np.int64), device=x.device)
    return x.index_select(0, i), y.index_select(0, i)


def build_context(
    seed: int,
    data_cfg: DataConfig,
    train_cfg: TrainConfig,
    run_cfg: RunConfig,
    workload: WorkloadConfig,
    n_devices: int,
    dataset: Optional[Dataset] = None,
) -> Context:
    """Load (or take) the data set, partition it over ``n_devices``, move it to the device, build the model.

    ``[train] precision = "bfloat16"`` on hardware without bfloat16 arithmetic: :class:`ConfigError` (nothing loaded).
    """
    numerics = training_numerics(train_cfg)
    ds = dataset if dataset is not None else load_dataset(data_cfg.dataset, data_cfg.data_dir, **data_cfg.loader_options())
    record = dataset_record(ds) if ds.source is not None else None  # a user's own files: what was read
    stored = (ds.source or {}).get("stored_shape")
    if stored is not None and len(stored) == 1 and train_cfg.model != "mlp":  # an npz of feature vectors (N, F)
        raise DatasetError(f"{ds.source.get('file', ds.name)}: holds feature vectors ({stored[0]} features per "
                           f"example), which [train] model = {train_cfg.model!r} cannot take (it convolves images); "
                           f"expected [train] model = \"mlp\" for feature vectors")
    val = None
    pool, server_idx, splits = P.device_splits(ds.y_train, ds.y_test, ds.n_classes, data_cfg, n_devices, seed, ds.name)
    if pool is not None:
        if data_cfg.validation_size:
            val = validation_indices(ds, pool, data_cfg.validation_size, np.random.default_rng([seed, 0x7A1D]))
            val = (ds.x_train[val], ds.y_train[val])
        ds = dataclasses.replace(ds, x_train=ds.x_train[pool], y_train=ds.y_train[pool])
    device = compute_device(train_cfg.device)
    if val is not None:  # the devices' data exactly as without it; each test set swapped for a validation set like it
        rng, like, splits = np.random.default_rng([seed, 0x7A1E]), {}, list(splits)
        for k, s in enumerate(splits):  # devices that share one test set share one validation set
            key = np.asarray(s.test, dtype=np.int64).tobytes()
            if key not in like:
                like[key] = validation_like(s.test, ds.y_test, val[1], ds.n_classes, rng, f"device {k}")
            splits[k] = dataclasses.replace(s, test=like[key])
        ds = dataclasses.replace(ds, x_test=val[0], y_test=val[1])
    x_train = torch.as_tensor(ds.x_train, device=device)
    y_train = torch.as_tensor(ds.y_train, device=device)
    x_test = torch.as_tensor(ds.x_test, device=device)
    y_test = torch.as_tensor(ds.y_test, device=device)
    clients, tests = [], {}
    for s in splits:
        sup = np.concatenate([s.train, s.labeled])
        key = np.asarray(s.test, dtype=np.int64).tobytes()
        if key not in tests:  # devices that share one test set (FedDure's splits) share one copy of it
            tests[key] = _gather(x_test, y_test, s.test)
        clients.append(
            ClientData(
                *_gather(x_train, y_train, sup),
                *_gather(x_train, y_train, s.train),
                *_gather(x_train, y_train, s.labeled),
                *_gather(x_train, y_train, s.unlabeled),
                *tests[key],
                split=s,
            )
        )
    template = build_model(train_cfg.model, ds.input_shape, ds.n_classes, ds.vocab_size, seed=seed).to(device)
    bits = model_bits(template) if workload.model_bits == "auto" else int(workload.model_bits)
    if workload.cycles_source == "flops":
        cycles = flops_per_sample(template, ds.input_shape) / workload.flops_per_cycle
    else:
        cycles = float(workload.cycles_per_sample)
    server_x = server_y = val_x = val_y = None
    used = [s.train for s in splits] + [s.labeled for s in splits] + [s.unlabeled for s in splits]
    if server_idx is not None:
        used.append(np.asarray(server_idx))
        if data_cfg.server_validation:
            server_idx, val_idx = P.hold_out_balanced(server_idx, ds.y_train, data_cfg.server_validation,
                                                      np.random.default_rng([seed, 0x7A11]))
            val_x, val_y = _gather(x_train, y_train, val_idx)
        server_x, server_y = _gather(x_train, y_train, server_idx)
    unused = np.setdiff1d(np.arange(len(ds.y_train)), np.concatenate(used).astype(np.int64))
    pool_x, pool_y = _gather(x_train, y_train, unused)
    return Context(
        seed=seed,
        data_cfg=data_cfg,
        train_cfg=train_cfg,
        run_cfg=run_cfg,
        workload=workload,
        dataset_name=ds.name,
        n_classes=ds.n_classes,
        input_shape=ds.input_shape,
        vocab_size=ds.vocab_size,
        device=device,
        clients=clients,
        model=template,
        model_bits=bits,
        cycles_per_sample=cycles,
        executor=make_executor(train_cfg.executor, device, numerics, train_cfg.vmap_max_clients),
        server_x=server_x,
        server_y=server_y,
        val_x=val_x,
        val_y=val_y,
        pool_x=pool_x,
        pool_y=pool_y,
        data_mean=ds.mean,
        data_std=ds.std,
        data_record=record,
        hflip_preserves_labels=data_cfg.hflip,
    )
