"""Configuration of the learning side of a scenario: ``[data]``, ``[train]``, ``[run]``, ``[algorithms.*]``.

Torch-free on purpose (``edgesim plan`` loads scenarios without paying for
torch). Each dataclass validates itself and names the field, the value and
what was expected. The names of data sets, partitions and models come from
their registries (:mod:`edgesim.learning.registry`), which import no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Optional, Union

from edgesim.config import (
    AnyOf,
    Choice,
    ConfigError,
    Described,
    Finite,
    Flag,
    Integer,
    Items,
    Text,
    build_config,
    check_int,
    check_keys,
    fail,
)
from edgesim.config import key as scenario_key
from edgesim.learning.data.datasets import DATASETS
from edgesim.learning.data.partitions import PARTITIONS
from edgesim.learning.model_specs import MODELS
from edgesim.learning.registry import check_fixed, declared

Number = Union[int, float]

EXECUTORS = ("auto", "sequential", "vmap")
OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("constant", "cosine")
BACKENDS = ("torch", "parametric")
PRECISIONS = ("float32", "bfloat16")  # edgesim.learning.numerics
MEMORY_FORMATS = ("channels_last", "contiguous")
DEVICES = ("auto", "cpu", "cuda")
TRACKERS = ("none", "mlflow", "tensorboard")
PARAMETRIC = "parametric"  # the one "algorithm" of a physics-only run
LOCAL_POOL, RAY_POOL = "local", "ray"  # where [run] client_workers train: local processes or Ray actors
CLIENT_POOLS = (LOCAL_POOL, RAY_POOL)
DEFAULT_ALGORITHMS = ["fedavg", "fedprox", "local"]


@dataclass(frozen=True)
class DataConfig:
    """Which data set, where it lives, and how it is split over the devices.

    ``dataset`` is a name of ``edgesim.learning.data.datasets.DATASETS``;
    ``data_dir`` is required for every data set except ``digits`` (bundled
    with scikit-learn) and ``synthetic``. ``partition`` is a name of
    ``edgesim.learning.data.partitions.PARTITIONS`` (each entry lists the fields
    below that it reads); ``alpha`` is the Dirichlet concentration,
    ``labeled_ratio_alpha`` the Dir₂ concentration of the labelled fraction
    (UM-pFSSL) and ``min_labeled`` the fewest labelled samples a device gets
    under ``dirichlet`` (1, the default, as before; 0 is UM-pFSSL's split, in
    which a device may hold no label), ``n_clusters`` the 𝒦 of DoFed-SPP's SUBSET split and
    ``size_scale`` scales DoFed-SPP's set sizes (500/10/190·C/𝒦).
    ``labeled_fraction`` is the labelled share of each client under ``iid``;
    ``labels_per_class`` and ``server_labeled`` serve FedDure's and the
    labels-at-server splits. ``server_validation`` holds that many of the
    server's labelled images out of its training set (class-balanced, drawn
    from the run seed) as a validation set: the labels-at-server methods
    report ``val_accuracy`` on it every round, for choosing hyper-parameters
    without the test set (0, the default: the server trains on all of them).
    ``file`` names the ``.npz`` archive of ``dataset = "npz"`` (relative to
    ``data_dir``; unset: the one ``.npz`` in ``data_dir``); ``image_size``
    ``[H, W]`` resizes the images of ``dataset = "image_folder"`` (unset: they
    must share one size) and ``test_fraction`` is the share of each class it
    holds out as the test split when the folder has no ``train/``/``test/``
    subfolders (unset: 0.2) — docs/use/data.md. ``train_pool_size`` draws a random subset of
    the train split (stratified by nothing: uniform without replacement,
    from the run seed) before partitioning — a smaller federation of the
    same data set (``None``: the whole split). ``test_size`` caps each
    device's test set (``None``: all eligible). ``validation_size`` > 0
    evaluates on a validation split instead of the test split: that many
    train images outside the train pool (uniform, from the run seed) are the
    validation split, and each device's test set is swapped for one with the
    same number of images of each class drawn from it. The devices hold
    exactly the data of the same scenario without the option and no test
    image is looked at: this is how hyper-parameters are chosen (it needs
    ``train_pool_size``).
    ``hflip``: whether the augmented views (FixMatch's weak and strong, FedMix's perturbations) may mirror an
    image left–right. Unset, it is the data set's own rule (``DatasetSpec.hflip_preserves_labels``: on for
    CIFAR, CINIC-10, Fashion-MNIST; off for digits, MNIST, OrganMNIST, synthetic blobs — and off for ``npz``,
    ``image_folder`` and plugin data sets, whose labels nothing is known about); the resolved value is what
    ``config.toml`` records (docs/use/data.md).
    """

    dataset: str = scenario_key("digits", "the data set, by registered name (`edgesim list datasets`)",
                                allowed=Choice(choices=lambda value: DATASETS.names,
                                               registered="a plugin's data set"))
    data_dir: Optional[str] = scenario_key(
        None, "folder holding the data set's files; default $EDGESIM_DATA; relative to the scenario file",
        allowed=Text(words="a folder path", optional=True, also="left out for a bundled data set"))
    partition: str = scenario_key("dirichlet", "how the data is split over the devices (`edgesim list partitions`)",
                                  allowed=Choice(choices=lambda value: PARTITIONS.names,
                                                 registered="a plugin's partition"))
    alpha: Number = scenario_key(0.5, "Dirichlet concentration α of the per-class split (smaller: more skewed)",
                                 allowed=Finite(minimum=0, strict=True))
    labeled_ratio_alpha: Number = scenario_key(0.5, "Dir₂ concentration of each device's labelled fraction "
                                               "(UM-pFSSL)", allowed=Finite(minimum=0, strict=True))
    min_labeled: int = scenario_key(1, "fewest labelled samples a device gets under the Dirichlet split",
                                    unit="samples", allowed=Integer(0))
    n_clusters: int = scenario_key(5, "class clusters 𝒦 of DoFed-SPP's SUBSET/NORMAL splits", unit="clusters",
                                   allowed=Integer(2))
    size_scale: Number = scenario_key(1.0, "scale of DoFed-SPP's set sizes (500 / 10 / 190·C/𝒦 per device)",
                                      allowed=Finite(minimum=0, strict=True))
    labeled_fraction: Number = scenario_key(1.0, "labelled share of each device's data under the iid split",
                                            allowed=Finite(minimum=0, maximum=1, noun="a fraction"))
    labels_per_class: int = scenario_key(5, "labelled samples per class of FedDure's splits", unit="samples/class",
                                         allowed=Integer(1))
    server_labeled: int = scenario_key(1000, "labelled samples held by the server (labels-at-server splits)",
                                       unit="samples", allowed=Integer(1))
    server_validation: int = scenario_key(
        0, "of those, samples held out as the server's validation set", unit="samples",
        allowed=Integer(0, also="fewer than server_labeled; 0 unless partition is a labels_at_server one"))
    train_pool_size: Optional[int] = scenario_key(
        None, "draw this many train samples before partitioning; unset: the whole split", unit="samples",
        allowed=Integer(1, optional=True))
    test_size: Optional[int] = scenario_key(None, "cap of each device's test set; unset: all eligible",
                                            unit="samples", allowed=Integer(1, optional=True))
    validation_size: int = scenario_key(
        0, "evaluate on this many held-out train samples instead of the test split", unit="samples",
        allowed=Integer(0, also="0 unless train_pool_size is set"))
    file: Optional[str] = scenario_key(
        None, 'the .npz archive of dataset = "npz", relative to data_dir; unset: the one .npz there',
        allowed=Text(words="a file path", optional=True, expected="the path of an .npz file (a non-empty string)"))
    image_size: Optional[list] = scenario_key(
        None, '[H, W] every image of dataset = "image_folder" is resized to; unset: one size required',
        unit="pixels", allowed=Items(item=Integer(1), length=2, optional=True,
                                     expected="[H, W]: two integers >= 1 (pixels)"))
    test_fraction: Optional[Number] = scenario_key(
        None, 'share of each class dataset = "image_folder" holds out as the test split (no test/ folder); unset: '
        '0.2', allowed=Finite(minimum=0, strict=True, below=1, noun="a fraction", optional=True))
    hflip: Optional[bool] = scenario_key(
        None, "whether the augmented views may mirror an image left-right; unset: the data set's own rule (off for "
        "npz, image_folder and plugin data sets; docs/use/data.md)", allowed=Flag(optional=True))

    def __post_init__(self):
        check_keys(self)  # each key's own range (its metadata: edgesim.config.key); then what spans keys
        if self.hflip is None:  # the data set's own rule, resolved so that config.toml says which it was
            object.__setattr__(self, "hflip", DATASETS[self.dataset].hflip_preserves_labels)
        if self.data_dir is not None and not DATASETS[self.dataset].needs_files:
            fail("data_dir", self.data_dir, f"left out: dataset = {self.dataset!r} is bundled, it reads no folder")
        self._check_loader_keys()
        if self.server_validation:
            if not self.partition.startswith("labels_at_server"):
                fail("server_validation", self.server_validation,
                     f"0 with partition = {self.partition!r} (it holds out part of the server's labelled set, "
                     "which only the labels_at_server partitions leave)")
            if self.server_validation >= self.server_labeled:
                fail("server_validation", self.server_validation,
                     f"fewer than server_labeled = {self.server_labeled} (the server must keep labels to train on)")
        if self.validation_size and self.train_pool_size is None:
            fail("validation_size", self.validation_size,
                 "0 unless train_pool_size is set (the validation images are train images outside the train pool)")

    def _check_loader_keys(self) -> None:
        """``file``, ``image_size``, ``test_fraction``: set only for a data set that reads them (their form: their rules)."""
        options = DATASETS[self.dataset].options
        for key in ("file", "image_size", "test_fraction"):
            if getattr(self, key) is not None and key not in options:
                readers = [n for n, spec in DATASETS.items() if key in spec.options]
                fail(key, getattr(self, key), f"left out: only dataset = {' or '.join(map(repr, readers))} reads it")

    def loader_options(self) -> dict:
        """The keys of this table that the data set's loader takes (``load_dataset(..., **options)``), those set."""
        options = DATASETS[self.dataset].options
        return {k: getattr(self, k) for k in ("file", "image_size", "test_fraction")
                if k in options and getattr(self, k) is not None}


@dataclass(frozen=True)
class TrainConfig:
    """Local training: model, SGD hyper-parameters, executor and compute device.

    The number of local epochs is the workload's ``local_iterations`` (I of
    Eq. (7)), so that what is trained is what the clock charges for.

    ``executor = "auto"`` picks the vectorised executor on a GPU and the
    sequential one on a CPU (where vmap is slower, see docs/extend/executors.md).
    ``optimizer``: ``"sgd"`` (with ``momentum``, ``nesterov``,
    ``weight_decay``) or ``"adam"`` (β = (0.9, 0.999), L2 ``weight_decay``);
    ``schedule``: ``"constant"`` or ``"cosine"`` (FixMatch's decay over the
    local steps of a round). Algorithms may override them in their own table.

    ``precision``: ``"float32"`` or ``"bfloat16"`` (the forward pass and the loss under bfloat16 autocast;
    weights, gradients, optimizer and aggregation in float32; refused on hardware without bfloat16
    arithmetic). ``memory_format``: ``"channels_last"`` (convolution weights and inputs in NHWC order
    while a client trains, the default) or ``"contiguous"`` (NCHW, the format of runs before it; it
    reproduces them bit for bit). Both: :mod:`edgesim.learning.numerics`, docs/extend/executors.md.

    ``vmap_max_clients``: the vectorised executor trains at most this many clients in one pass (unset: all of
    a round's clients at once). It bounds GPU memory, which grows with clients × batch rows; the trained
    models are the same for every value (each client keeps its own random streams; the logged training loss
    may differ in its last bits).
    """

    model: str = scenario_key("cnn", "the model, by registered name (`edgesim list models`)",
                              allowed=Choice(choices=lambda value: MODELS.names,  # MODELS grows with plugins
                                             registered="a plugin's model (`edgesim list models`)"))
    lr: Number = scenario_key(0.05, "local learning rate", allowed=Finite(minimum=0, strict=True))
    momentum: Number = scenario_key(0.9, "SGD momentum", allowed=Finite(minimum=0, below=1))
    weight_decay: Number = scenario_key(0.0, "L2 weight decay", allowed=Finite(minimum=0))
    optimizer: str = scenario_key("sgd", "local optimizer", allowed=Choice(choices=OPTIMIZERS))
    nesterov: bool = scenario_key(False, "Nesterov momentum (SGD, momentum > 0)", allowed=Flag())
    schedule: str = scenario_key("constant", "learning-rate schedule over a round's local steps",
                        allowed=Choice(choices=SCHEDULES))
    batch_size: int = scenario_key(32, "local mini-batch size", unit="samples", allowed=Integer(1))
    executor: str = scenario_key("auto", "how clients train: one after another, vectorised (vmap), or chosen by the device",
                        allowed=Choice(choices=EXECUTORS))
    device: str = scenario_key("auto", "where torch trains; \"auto\": a GPU when one is visible",
                      allowed=Choice(choices=DEVICES))
    eval_batch_size: int = scenario_key(2048, "batch size of evaluation", unit="samples", allowed=Integer(1))
    precision: str = scenario_key("float32", "arithmetic of the forward pass and the loss; \"bfloat16\": autocast, float32 "
                         "weights, optimizer and aggregation, refused without bfloat16 hardware (docs/model/numerics.md)",
                         allowed=Choice(choices=PRECISIONS))
    memory_format: str = scenario_key("channels_last", "memory order of convolution weights and inputs while a client "
                             "trains; \"contiguous\" reproduces earlier runs bit for bit (docs/model/numerics.md)",
                             allowed=Choice(choices=MEMORY_FORMATS))
    vmap_max_clients: Optional[int] = scenario_key(None, "clients the vectorised executor trains in one pass (unset: all of "
                                          "a round's); bounds GPU memory; the same models for every value",
                                          unit="clients", allowed=Integer(1, optional=True))

    def __post_init__(self):
        check_keys(self)  # each key's own range (its metadata: edgesim.config.key); then what spans keys
        if self.nesterov and (self.optimizer != "sgd" or self.momentum == 0):
            fail("nesterov", self.nesterov, 'false unless optimizer = "sgd" with momentum > 0')


@dataclass(frozen=True)
class RunConfig:
    """What a run does: which algorithms, how many clients per round, when to stop, what to report.

    ``rounds`` defaults to the budget's G; with ``max_time_s`` an algorithm
    starts no round once its simulated clock is at or past it (``>=``: a
    round that ends exactly then is the last); the round in progress ends as
    it would, so the last round may end after ``max_time_s``. ``plateau_tol`` is the paper's
    final-accuracy rule (mean accuracy changes by less than it between
    rounds), held for ``plateau_patience`` consecutive rounds (1 = the
    paper's literal rule; see docs/use/metrics.md); ``stop_on_plateau`` also
    ends the run there (both counted in evaluated rounds).

    ``eval_every``: evaluate every that many rounds and the last (unset: every
    round); ``eval_devices``: the devices evaluated — ``"all"`` (unset), a count or
    a fraction of ``n_devices``, a fixed sample drawn once from the run's seed;
    ``label_quality``: the labelling diagnostic (``labeling_accuracy``) at every
    evaluated round (true, unset), never (false) or every n-th round and the last
    (:mod:`edgesim.learning.evaluation`, docs/use/metrics.md). ``client_workers``: the
    round's devices trained on that many local worker processes (unset: 1, in
    this process; the same bytes, docs/extend/executors.md).

    ``backend`` is ``"torch"`` (real training of ``algorithms``) or
    ``"parametric"``: a physics-only run of the clock alone with
    :class:`edgesim.curve.ParametricBackend` (no torch; ``algorithms`` is then
    ``["parametric"]``, its default there, and ``[data]``, ``[train]`` and
    ``[algorithms.*]`` are not used and must be left out).

    ``threads``: torch threads the run trains with (an integer >= 1, or
    ``"auto"`` = the cores this process may use); default 1, see
    :mod:`edgesim.scenarios.threads`. Results depend on it, so it is recorded.
    ``plugins``: modules imported before the scenario is validated, which
    register algorithms, models, data sets or partitions (:mod:`edgesim.learning.plugins`).
    ``sustain_rounds``: k of the time-to-accuracy rule — a threshold counts as
    reached at the first round from which the accuracy stays at or above it for
    k evaluated rounds (unset: 3, :data:`edgesim.results.metrics.DEFAULT_SUSTAIN_ROUNDS`).
    ``tracking``: ``"none"``, ``"mlflow"`` or ``"tensorboard"`` (each round's
    metrics as it ends, and the finished folder to MLflow,
    :mod:`edgesim.scenarios.tracking`; extras).

    ``warm_start``: ``{algorithm = NAME, rounds = R}`` — the run's first R
    rounds are NAME's (a supervised FedAvg on the labelled data:
    :func:`warm_start_algorithms`), computed once and shared by every
    algorithm: each starts round R from its model, its clock, bits and energy
    (:mod:`edgesim.scenarios.warm_start`, docs/use/warm_start.md). ``rounds`` (the run's
    length) counts them: it must exceed R.
    """

    algorithms: list = scenario_key(doc="the algorithms the run compares (`edgesim list algorithms`)",
                           allowed=Described(words="registered names, each once"),
                           default_factory=lambda: list(DEFAULT_ALGORITHMS))
    clients_per_round: int = scenario_key(10, "devices selected each round (K; at most system.n_devices)", unit="devices",
                                 allowed=Integer(1))
    rounds: Optional[int] = scenario_key(None, "rounds the run lasts; unset: budget.rounds (which also sets the per-round "
                                "budget T/G)", unit="rounds", allowed=Integer(1, optional=True))
    max_time_s: Optional[Number] = scenario_key(None, "no round starts once the algorithm's simulated clock is at or past "
                                       "this; the round in progress ends as it would", unit="s",
                                       allowed=Finite(minimum=0, strict=True, optional=True))
    accuracy_thresholds: list = scenario_key(doc="accuracies whose time to reach the run summary and the report give",
                                    allowed=Items(item=Finite(minimum=0, strict=True, maximum=1,
                                                              noun="an accuracy"), length=None),
                                    default_factory=lambda: [0.5, 0.6, 0.7, 0.8, 0.9])
    plateau_tol: Number = scenario_key(0.01, "final-accuracy rule: mean accuracy changes by less than this between rounds",
                              allowed=Finite(minimum=0))
    plateau_patience: int = scenario_key(5, "rounds the plateau must hold", unit="rounds", allowed=Integer(1))
    stop_on_plateau: bool = scenario_key(False, "end an algorithm when it plateaus", allowed=Flag())
    checkpoint_every: int = scenario_key(0, "checkpoint every this many rounds, for resuming a killed run; 0: never",
                                unit="rounds", allowed=Integer(0))
    backend: str = scenario_key("torch", "real training, or the clock alone with a parametric accuracy curve",
                       allowed=Choice(choices=BACKENDS))
    threads: Union[int, str] = scenario_key(1, "torch threads the run trains with; \"auto\": the cores", unit="threads",
                                   allowed=Integer(1, auto=True))
    plugins: list = scenario_key(doc="modules imported first (looked for beside the scenario file, then on the Python path), "
                        "which register algorithms, models, data sets or partitions",
                        allowed=Items(item=Text("a module name"), length=None,
                                      expected='a list of module names, such as ["my_algorithm"]'),
                        default_factory=list)
    tracking: str = scenario_key("none", "send each round's metrics to a tracker as the run goes (mlflow, tensorboard: "
                        "extras)", allowed=Choice(choices=TRACKERS))
    sustain_rounds: Optional[int] = scenario_key(None, "a threshold counts as reached at the first round from which the "
                                        "accuracy stays at or above it for this many evaluated rounds (the run "
                                        "summary, edgesim report); unset: 3", unit="rounds",
                                        allowed=Integer(1, optional=True))
    warm_start: Optional[dict] = scenario_key(None, "{algorithm = NAME, rounds = R}: every algorithm starts from NAME's first "
                                     "R rounds", allowed=Described(words="a table with R < rounds, or unset"))
    eval_every: Optional[int] = scenario_key(
        None, "evaluate every this many rounds and the last; the other rounds' accuracy cells are empty "
        "(docs/use/metrics.md); unset: every round", unit="rounds",
        allowed=Integer(1, optional=True, also="at most the run's rounds"))
    eval_devices: Union[str, int, float, None] = scenario_key(
        None, "the devices evaluated: all, a count or a fraction of n_devices, a fixed sample drawn once from the "
        "seed (docs/use/metrics.md); unset: all",
        allowed=AnyOf(rules=(Choice(choices=("all",)), Integer(1), Finite(minimum=0, strict=True, maximum=1)),
                      also="a count at most system.n_devices", optional=True,
                      expected='"all", a number of devices >= 1 or a fraction in (0, 1]'))
    label_quality: Union[bool, int, None] = scenario_key(
        None, "the labelling diagnostic (labeling_accuracy): at every evaluated round, never, or every n-th round "
        "and the last; unset: true", allowed=AnyOf(
            rules=(Flag(), Integer(1)), optional=True,
            expected="true, false or an integer >= 1 (every that many rounds and the last)"))
    client_workers: Optional[int] = scenario_key(
        None, "local worker processes that train a round's devices (docs/extend/executors.md); results are the same bytes; "
        "unset: 1, in the run's process", unit="processes", allowed=Integer(1, optional=True))

    def __post_init__(self):
        check_keys(self)  # each key's own range (its metadata: edgesim.config.key); then what spans keys
        if self.backend == "parametric" and self.algorithms == DEFAULT_ALGORITHMS:
            object.__setattr__(self, "algorithms", [PARAMETRIC])
        if self.backend == "parametric" and self.algorithms != [PARAMETRIC]:
            fail("algorithms", self.algorithms, f'["{PARAMETRIC}"] (or nothing) with backend = "parametric"')
        if not isinstance(self.algorithms, list) or not self.algorithms or not all(isinstance(a, str) for a in self.algorithms):
            fail("algorithms", self.algorithms, "a non-empty list of algorithm names")
        if len(set(self.algorithms)) != len(self.algorithms):
            fail("algorithms", self.algorithms, "each algorithm at most once")
        check_warm_start(self.warm_start, self.rounds, self.backend)
        check_evaluation(self)


def check_evaluation(run: "RunConfig") -> None:
    """``eval_every``, ``eval_devices``, ``label_quality`` and ``client_workers`` (each checked by its rule: an
    integer >= 1; "all", a count >= 1 or a fraction in (0, 1]; true, false or an integer >= 1; an integer >= 1) left
    out of a physics-only run, which has no model to evaluate or train (docs/use/metrics.md,
    docs/extend/executors.md)."""
    if run.backend == PARAMETRIC:
        for key in ("eval_every", "eval_devices", "label_quality", "client_workers"):
            if getattr(run, key) is not None:
                fail(key, getattr(run, key), 'left out with backend = "parametric" (a physics-only run evaluates '
                                             'its curve at every round and trains nothing)')


WARM_START_KEYS = ("algorithm", "rounds")


def warm_start_algorithms() -> list[str]:
    """The algorithms a warm start may run: one global model trained on the labelled data alone (the FedAvg
    family with ``objective = "supervised"``, ``data = "labeled"``, ``local = "none"``: FedAvg*, FedProx, …)."""
    out = []
    for name, spec in declared().items():
        try:
            cfg = spec.config_cls()
        except Exception:  # noqa: BLE001 - a plugin's config without defaults is no warm start
            continue
        if (getattr(cfg, "objective", None), getattr(cfg, "data", None), getattr(cfg, "local", None)) == \
                ("supervised", "labeled", "none"):
            out.append(name)
    return sorted(out)


def check_warm_start(value, rounds: Optional[int], backend: str) -> None:
    """``[run] warm_start``: absent, or ``{algorithm = NAME, rounds = R}`` with NAME a supervised-on-labels
    algorithm and 1 <= R < ``rounds`` (the run's length, when set; the budget's G is checked with the scenario)."""
    if value is None:
        return
    example = '{algorithm = "fedavg_labeled", rounds = 20}'
    if not isinstance(value, dict):
        fail("warm_start", value, f"a table such as {example}")
    if backend == PARAMETRIC:
        fail("warm_start", value, 'left out with backend = "parametric" (a physics-only run trains nothing)')
    unknown = sorted(set(value) - set(WARM_START_KEYS))
    if unknown:
        fail(f"warm_start.{unknown[0]}", value[unknown[0]], f"one of the keys {', '.join(WARM_START_KEYS)}")
    for key in WARM_START_KEYS:
        if key not in value:
            fail("warm_start", value, f"both keys algorithm and rounds, such as {example}")
    allowed = warm_start_algorithms()
    if value["algorithm"] not in allowed:
        fail("warm_start.algorithm", value["algorithm"],
             "a supervised algorithm on the labelled data, one of " + ", ".join(repr(a) for a in allowed))
    check_int("warm_start.rounds", value["rounds"], 1)
    if rounds is not None and value["rounds"] >= rounds:
        fail("warm_start.rounds", value["rounds"], f"fewer than rounds (= {rounds}), which counts the warm start's "
             f"rounds too")


def build_algorithms(values, where: str) -> dict:
    """``[algorithms.NAME]`` tables → {name: config}; names and keys checked against the registry (a
    ``compression`` sub-table is the scenario's to read: :func:`edgesim.compression.build_compression`).

    The registry's names and config classes are torch-free
    (:data:`edgesim.learning.registry.ALGORITHMS`). A table may not set an
    option that makes the algorithm another registered one (``fixavg`` with
    ``objective = "supervised"``): :func:`edgesim.learning.algorithms.check_fixed`.
    """
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected tables [algorithms.NAME], got {values!r}")
    out = {}
    for name, table in values.items():
        if name not in declared():
            raise ConfigError(f"{where}: unknown algorithm {name!r}; expected one of: {', '.join(sorted(declared()))}")
        table_where = f"{where[:-1]}.{name}]"
        if isinstance(table, dict):  # [algorithms.NAME.compression]: read by edgesim.compression.build_compression
            table = {k: v for k, v in table.items() if k != "compression"}
        out[name] = build_config(declared()[name].config_cls, table, table_where)
        try:
            check_fixed(name, out[name])
        except ValueError as e:
            raise ConfigError(f"{table_where}: {e}") from None
    return out


VARIANT_KEYS = ("algorithm", "compression", "round_mode")  # a [variants.NAME] table's own keys; the rest: options
VARIANT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


@dataclass(frozen=True)
class Variant:
    """A ``[variants.NAME]`` table: a named instance of the registered ``algorithm`` that runs beside the others.

    Its options are the algorithm's (its ``[algorithms.ALGORITHM]`` table's values, then the variant's own keys);
    ``compression`` is its own ``[variants.NAME.compression]`` table (``None``: the algorithm's);
    ``round_mode`` its own ``[budget] round_mode`` (``None``: the run's), within the run's kind of clock (round by
    round: ``sync`` or ``deadline``; asynchronous: ``fedasync`` or ``fedbuff``). It is built by the algorithm's own
    builder under the algorithm's name, so it draws the same random streams: a variant that changes nothing gives
    the algorithm's numbers exactly (docs/use/concepts.md, "Variants").
    """

    algorithm: str
    compression: Optional[dict] = None
    round_mode: Optional[str] = None


def build_variants(values, algorithm_tables, where: str) -> tuple[dict, dict]:
    """``[variants.NAME]`` tables → ``({NAME: Variant}, {NAME: config})``; each refusal one line naming the table.

    A variant's name must be new (not a registered algorithm's, which would make the two indistinguishable in
    every table and figure) and usable as a folder name; ``algorithm`` names a registered algorithm (not another
    variant); its other keys are that algorithm's options (over its ``[algorithms.ALGORITHM]`` table's).
    """
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: [variants]: expected tables [variants.NAME] (such as [variants.fedavg_topk] "
                          f"with algorithm = \"fedavg\"), got {values!r}")
    tables = algorithm_tables if isinstance(algorithm_tables, dict) else {}
    variants, configs = {}, {}
    for name, table in values.items():
        at = f"{where}: [variants.{name}]"
        if name in declared():
            raise ConfigError(f"{at}: the name {name!r} is a registered algorithm's; expected a name of its own "
                              f"(such as \"{name}_v2\") with algorithm = \"{name}\"")
        if not name or name.startswith(".") or not set(name) <= VARIANT_NAME_CHARS:
            raise ConfigError(f"{at}: name {name!r}: expected letters, digits, '_', '-' or '.' (it names the "
                              f"variant's rows, figures and folders), not starting with '.'")
        if not isinstance(table, dict):
            raise ConfigError(f"{at}: expected a table with algorithm = NAME and its options, got {table!r}")
        if "algorithm" not in table:
            raise ConfigError(f"{at}: algorithm: missing; expected the registered algorithm it is a variant of, "
                              f"such as algorithm = \"fedavg\"")
        base = table["algorithm"]
        if not isinstance(base, str) or base not in declared():
            raise ConfigError(f"{at}: algorithm = {base!r}: unknown algorithm; expected one of: "
                              f"{', '.join(sorted(declared()))}")
        own = {k: v for k, v in table.items() if k not in VARIANT_KEYS}
        inherited = tables.get(base) if isinstance(tables.get(base), dict) else {}
        options = {**{k: v for k, v in inherited.items() if k != "compression"}, **own}
        configs[name] = build_config(declared()[base].config_cls, options, at)
        mode = table.get("round_mode")
        if mode is not None and not isinstance(mode, str):
            raise ConfigError(f"{at}: round_mode = {mode!r}: expected a round mode such as \"deadline\"")
        compression = table.get("compression")
        if compression is not None and not isinstance(compression, dict):
            raise ConfigError(f"{at}: compression = {compression!r}: expected a table with keys uplink and/or "
                              f"downlink")
        variants[name] = Variant(base, compression, mode)
    return variants, configs


def algorithm_of(learning, name: str) -> str:
    """The registered algorithm behind ``name``: a variant's ``algorithm``, else ``name`` itself."""
    variant = learning.get("variants", {}).get(name)
    return variant.algorithm if variant is not None else name


SECTIONS = {
    "data": partial(build_config, DataConfig),
    "train": partial(build_config, TrainConfig),
    "run": partial(build_config, RunConfig),
    "algorithms": build_algorithms,
}
