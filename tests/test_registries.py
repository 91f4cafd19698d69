"""Registries as the single source of names: models, datasets, partitions and algorithms.

Every name a scenario may use has a builder and every builder a name; an unknown
name fails with one line listing the registry's names; every MedMNIST flag is a
data set a scenario can name and load.
"""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest

from edgesim.config import ConfigError
from edgesim.learning.algorithms import REGISTRY, AlgorithmSpec, register
from edgesim.learning.config import DataConfig, TrainConfig
from edgesim.learning.context import make_partition
from edgesim.learning.data import partitions as P
from edgesim.learning.data.dataset import Dataset, DatasetError
from edgesim.learning.data.datasets import DATASETS, load_dataset
from edgesim.learning.data.medmnist import MEDMNIST
from edgesim.learning.data.partitions import PARTITIONS
from edgesim.learning.model_specs import MODELS
from edgesim.learning.models import build_model
from edgesim.learning.registry import Registry, resolve
from edgesim.scenarios.schema import load_scenario

DISPLAY = {"fedavg": "FedAvg", "fedprox": "FedProx", "fedbn": "FedBN", "local": "Local", "dofed_spp": "DoFed-SPP",
           "fedfomo": "FedFomo", "fedbe": "FedBE"}


# --------------------------------------------------------------------------- consistency


def test_config_validation_accepts_exactly_the_registered_names():
    for name in DATASETS:
        assert DataConfig(dataset=name).dataset == name
    for name in PARTITIONS:
        assert DataConfig(partition=name).partition == name
    for name in MODELS:
        assert TrainConfig(model=name).model == name
    assert len(DATASETS) == 10 + len(MEDMNIST)  # digits, mnist, fashion_mnist, cifar10/100, cinic10, dbpedia, synthetic, image_folder, npz
    for make in (lambda: DataConfig(dataset="nope"), lambda: DataConfig(partition="nope"),
                 lambda: TrainConfig(model="nope")):
        with pytest.raises(ValueError, match="'nope': expected one of "):
            make()


def test_every_model_name_has_a_builder_that_builds_it():
    import torch.nn as nn

    for name, spec in MODELS.items():
        assert callable(spec.build), name
        shape = (12,) if spec.input == "text" else (1, 16, 16)
        model = build_model(name, shape, 3, vocab_size=20 if spec.input == "text" else None, seed=0)
        assert isinstance(model, nn.Module), name


def test_every_dataset_name_has_a_loader_and_every_medmnist_flag_a_name():
    assert set(MEDMNIST) <= set(DATASETS)
    for name, spec in DATASETS.items():
        assert spec.name == name and callable(spec.load) and spec.kind in ("image", "text")
    free = {name for name, spec in DATASETS.items() if not spec.needs_files}
    assert free == {"digits", "synthetic"}
    assert load_dataset("synthetic", n_train=20, n_test=10).name == "synthetic"


def test_the_class_counts_known_without_files_are_the_loaded_ones(shared_data):
    """``DatasetSpec.n_classes`` (what `edgesim plan` uses without data) against every set loadable here."""
    assert DATASETS.lookup("synthetic").n_classes is None  # an option sets it
    assert {name: DATASETS.lookup(name).n_classes for name in ("cifar100", "dbpedia")} == {"cifar100": 100, "dbpedia": 14}
    for name in ("digits", "mnist", "fashion_mnist"):
        assert DATASETS.lookup(name).n_classes == load_dataset(name, shared_data).n_classes, name
    for flag, (classes, _, _) in MEDMNIST.items():
        assert DATASETS.lookup(flag).n_classes == classes


def test_every_partition_reads_only_data_config_fields_and_splits():
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    y_train, y_test = np.repeat(np.arange(10), 200), np.repeat(np.arange(10), 20)
    ds = SimpleNamespace(y_train=y_train, y_test=y_test, n_classes=10)
    for name, spec in PARTITIONS.items():
        assert set(spec.reads) <= fields, name
        cfg = DataConfig(partition=name, n_clusters=2, size_scale=0.02, server_labeled=50)
        server, splits = make_partition(ds, cfg, 4, np.random.default_rng(0))
        assert len(splits) == 4 and all(isinstance(s, P.ClientSplit) for s in splits), name
        assert (server is not None) == name.startswith("labels_at_server"), name


def test_make_partition_draws_exactly_what_the_partition_functions_draw():
    """The registry only forwards the fields: same rng, same arguments, same indices as a direct call."""
    y_train, y_test = np.repeat(np.arange(10), 200), np.repeat(np.arange(10), 20)
    ds = SimpleNamespace(y_train=y_train, y_test=y_test, n_classes=10)
    cfg = DataConfig(partition="iid", labeled_fraction=0.3, test_size=7, alpha=0.7, n_clusters=2, size_scale=0.02,
                     labels_per_class=2, server_labeled=40)
    sizes = P.dofed_sizes(10, 2, 0.02)
    direct = {
        "iid": lambda r: (None, P.iid_partition(y_train, y_test, 4, r, 0.3, test_size=7, n_classes=10)),
        "dirichlet": lambda r: (None, P.dirichlet_partition(y_train, y_test, 4, 0.7, r, 0.5, test_size=7, n_classes=10)),
        "subset": lambda r: (None, P.subset_partition(y_train, y_test, 4, 2, r, *sizes, 7, n_classes=10)),
        "normal": lambda r: (None, P.normal_partition(y_train, y_test, 4, r, *sizes, 7, n_classes=10)),
        "feddure_iid_dir": lambda r: (None, P.feddure_partition(y_train, y_test, 4, "iid_dir", r, 2, 0.7, n_classes=10,
                                                                             test_size=7)),
        "labels_at_server": lambda r: P.labels_at_server_partition(y_train, y_test, 4, 40, r, 0.7, n_classes=10,
                                                                   test_size=7),
        "labels_at_server_iid": lambda r: P.labels_at_server_partition(y_train, y_test, 4, 40, r, None, n_classes=10,
                                                                       test_size=7),
    }
    for name, call in direct.items():
        got = make_partition(ds, dataclasses.replace(cfg, partition=name), 4, np.random.default_rng(5))
        want = call(np.random.default_rng(5))
        assert (got[0] is None) == (want[0] is None) and (got[0] is None or np.array_equal(got[0], want[0]))
        for a, b in zip(got[1], want[1], strict=True):
            for f in ("train", "labeled", "unlabeled", "test"):
                assert np.array_equal(getattr(a, f), getattr(b, f)), (name, f)


def test_every_algorithm_has_its_display_name():
    assert {name: REGISTRY[name].display for name in DISPLAY} == DISPLAY
    assert AlgorithmSpec("x", object, print, "").display == "x"  # default: the name


def test_register_keeps_its_signature_and_defaults_display_to_the_name(monkeypatch):
    monkeypatch.setattr("edgesim.learning.registry.ALGORITHMS", dict(REGISTRY))
    from edgesim.learning import registry

    @register("plain", object)
    def build_plain(ctx, cfg):
        """Plain: a test algorithm."""

    register("pretty", object, "a summary", "Pretty-Name")(build_plain)
    assert registry.ALGORITHMS["plain"].display == "plain" and registry.ALGORITHMS["plain"].summary == "Plain: a test algorithm."
    assert registry.ALGORITHMS["pretty"].display == "Pretty-Name"


def test_docs_list_every_dataset_and_partition_name():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "use" / "data.md").read_text()
    for name in (*DATASETS, *PARTITIONS):
        assert f"| `{name}` |" in text, name


# --------------------------------------------------------------------------- unknown names


@pytest.mark.parametrize("key, value, registry", [
    ("data.dataset", "imagenet", DATASETS), ("data.partition", "shards", PARTITIONS), ("train.model", "vgg", MODELS),
])
def test_an_unknown_name_in_a_scenario_is_one_line_listing_the_registry(key, value, registry):
    with pytest.raises(ConfigError) as e:
        load_scenario(None, [f'{key}="{value}"'])
    section, field = key.split(".")
    message = str(e.value)
    assert "\n" not in message
    assert re.search(rf"default\.toml: \[{section}\]: {field} = '{value}': expected one of ", message), message
    assert message.endswith(", ".join(repr(n) for n in registry))


def test_an_unknown_name_given_to_a_builder_lists_the_registry():
    with pytest.raises(DatasetError, match=r"^unknown dataset 'imagenet'; expected one of: 'digits', .*'bloodmnist'"):
        load_dataset("imagenet")
    with pytest.raises(ValueError, match=r"^unknown model 'vgg'; expected one of: 'cnn', 'cnn_mc', 'cnn_mc2', 'small_cnn', 'peer_cnn', 'text', 'resnet9', 'mlp'$"):
        build_model("vgg", (1, 8, 8), 10)
    with pytest.raises(ValueError, match=r"^unknown partition 'shards'; expected one of: 'iid', 'dirichlet', "):
        make_partition(SimpleNamespace(y_train=None, y_test=None, n_classes=2), SimpleNamespace(partition="shards"), 2,
                       np.random.default_rng(0))


def test_registry_refuses_a_name_twice_and_resolves_lazy_references():
    reg = Registry("widget")
    reg.add(SimpleNamespace(name="a"))
    with pytest.raises(ValueError, match="widget 'a' is registered twice"):
        reg.add(SimpleNamespace(name="a"))
    assert reg.names == ("a",) and resolve("edgesim.learning.registry:Registry") is Registry
    with pytest.raises(ValueError, match="must be 'package.module:attribute'"):
        resolve("edgesim.learning.registry")


# --------------------------------------------------------------------------- MedMNIST names


def _write_medmnist(folder, flag: str, n: int = 12, side: int = 28) -> None:
    n_classes, channels, _ = MEDMNIST[flag]
    rng = np.random.default_rng(0)
    shape = (n, side, side) if channels == 1 else (n, side, side, 3)
    arrays = {}
    for split in ("train", "val", "test"):
        arrays[f"{split}_images"] = rng.integers(0, 256, shape, dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(n) % n_classes).reshape(n, 1).astype(np.uint8)
    np.savez(folder / f"{flag}.npz", **arrays)


@pytest.mark.parametrize("flag", sorted(MEDMNIST))
def test_each_medmnist_flag_validates_in_a_scenario_and_loads(flag, tmp_path):
    _write_medmnist(tmp_path, flag)
    sc = load_scenario(None, [f'data.dataset="{flag}"', f'data.data_dir="{tmp_path}"'])
    data = sc.learning["data"]
    assert data.dataset == flag
    ds = load_dataset(data.dataset, data.data_dir)
    n_classes, channels, _ = MEDMNIST[flag]
    assert isinstance(ds, Dataset) and ds.name == flag and ds.n_classes == n_classes
    assert ds.input_shape == (channels, 28, 28) and len(ds.y_train) == 12 and len(ds.y_test) == 12
    assert len(load_dataset(flag, tmp_path, merge_val=True).y_train) == 24
    assert DATASETS[flag].title.endswith("MNIST")


def test_model_weight_layers_match_the_built_models():
    """``ModelSpec.weight_layers`` (read torch-free by LG-FedAvg's check) is what the built model has."""
    from edgesim.learning.algorithms.fedavg.algorithm import _weight_layers
    from edgesim.learning.model_specs import MODELS

    for name, spec in MODELS.items():
        shape = (20,) if spec.input == "text" else (3, 32, 32)
        model = spec.build(shape, 10, 100 if spec.input == "text" else None)
        assert spec.weight_layers == len(_weight_layers(model)), name


def test_every_algorithm_is_declared_torch_free_and_built_by_its_module():
    from edgesim.learning.algorithms import ALGORITHMS

    assert ALGORITHMS is REGISTRY
    for name, spec in REGISTRY.items():
        assert spec.build is not None and spec.module == spec.build.__module__, name
        folder = spec.module.rsplit(".", 1)[0]  # edgesim's own: learning/algorithms/NAME/algorithm.py
        if folder.startswith("edgesim.learning.algorithms."):
            assert spec.module.endswith(".algorithm") and spec.config_cls.__module__ == f"{folder}.config", name


def test_an_algorithm_is_one_folder_that_no_shared_module_imports():
    """learning/algorithms/NAME/ holds config.py and algorithm.py; outside the folders (tests and benchmarks
    aside) no module imports a folder, and the command line names no algorithm."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    root = repo / "learning" / "algorithms"
    folders = sorted(p.name for p in root.iterdir() if (p / "__init__.py").exists())
    assert len(folders) >= 12
    for name in folders:
        assert (root / name / "config.py").exists() and (root / name / "algorithm.py").exists(), name
    pattern = re.compile(r"edgesim\.learning\.algorithms\.(" + "|".join(folders) + r")\b")
    for path in sorted(repo.glob("*/**/*.py")):
        part = path.relative_to(repo).parts
        if part[0] in ("tests", "benchmarks", ".venv") or (part[:2] == ("learning", "algorithms") and len(part) > 3):
            continue
        assert not pattern.search(path.read_text()), path
    assert "dofed_spp" not in (repo / "scenarios" / "cli.py").read_text()  # its planning is its hook
