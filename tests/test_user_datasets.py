"""A user's own data: ``dataset = "npz"`` and ``dataset = "image_folder"`` (learning/data/npz.py, image_folder.py).

Every file here is made by the test: the loaders' normalisation against hand-computed values, every
partition on them, the default scenario's algorithms end to end with the record in summary.json, and
bad files refused in one line naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgesim.config import ConfigError
from edgesim.learning.config import DataConfig
from edgesim.learning.data.datasets import DatasetError, load_dataset
from edgesim.learning.data.partitions import PARTITIONS


def make_npz(path: Path, n_train=400, n_test=100, shape=(1, 8, 8), n_classes=10, seed=0, **extra) -> Path:
    """Class blobs as uint8 images (learnable, so accuracy moves)."""
    rng = np.random.default_rng(seed)
    protos = rng.integers(0, 256, size=(n_classes, *shape))

    def draw(n):
        y = rng.permutation(np.arange(n) % n_classes)
        x = np.clip(protos[y] + rng.normal(0, 30, size=(n, *shape)), 0, 255).astype(np.uint8)
        return x, y

    (xt, yt), (xs, ys) = draw(n_train), draw(n_test)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{"x_train": xt, "y_train": yt, "x_test": xs, "y_test": ys, **extra})
    return path


def make_image_folder(root: Path, n_per_class=12, classes=("cat", "dog", "fox"), mode="L", sizes=((10, 12),),
                      ext=".png") -> Path:
    rng = np.random.default_rng(1)
    for k, name in enumerate(classes):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            w, h = sizes[i % len(sizes)]
            value = 40 + 80 * k
            shape = (h, w) if mode == "L" else (h, w, 3)
            pixels = np.clip(value + rng.normal(0, 10, size=shape), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, mode).save(root / name / f"{i:03d}{ext}")
    return root


# ----------------------------------------------------------------------------------------------- npz


def test_npz_normalises_each_channel_with_the_train_split_and_records_what_it_read(tmp_path):
    x_train = np.array([[[[0, 255]]], [[[255, 255]]]], dtype=np.uint8)  # (2, 1, 1, 2): pixels 0, 1, 1, 1
    np.savez(tmp_path / "mine.npz", x_train=x_train, y_train=np.array([0, 1]),
             x_test=np.array([[[[0, 0]]]], dtype=np.uint8), y_test=np.array([[1]]))
    ds = load_dataset("npz", tmp_path)
    # mean 3/4, variance 3/16 → std √3/4; a 0 pixel becomes (0 − 0.75) / 0.4330 = −√3
    assert ds.mean == pytest.approx((0.75,)) and ds.std == pytest.approx((np.sqrt(3) / 4,))
    assert ds.x_test[0, 0, 0, 0] == pytest.approx(-np.sqrt(3), rel=1e-6)
    assert ds.n_classes == 2 and ds.input_shape == (1, 1, 2) and ds.y_test.tolist() == [1]
    assert ds.source["format"] == "npz" and ds.source["file"].endswith("mine.npz") and len(ds.source["sha256"]) == 64


def test_npz_feature_vectors_become_one_channel_per_feature_and_hw_images_one_channel(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "f.npz", x_train=rng.normal(3, 2, size=(50, 5)), y_train=np.arange(50) % 2,
             x_test=rng.normal(size=(7, 5)), y_test=np.zeros(7))
    ds = load_dataset("npz", tmp_path)
    assert ds.input_shape == (5, 1, 1)
    np.testing.assert_allclose(ds.x_train.mean(axis=(0, 2, 3)), 0, atol=1e-5)  # each feature standardised
    np.testing.assert_allclose(ds.x_train.std(axis=(0, 2, 3)), 1, atol=1e-4)
    np.savez(tmp_path / "g.npz", x_train=np.zeros((4, 6, 6), np.uint8), y_train=[0, 1, 0, 1],
             x_test=np.zeros((2, 6, 6), np.uint8), y_test=[0, 1])
    assert load_dataset("npz", tmp_path, file="g.npz").input_shape == (1, 6, 6)


@pytest.mark.parametrize("arrays, message", [
    (dict(x_train=np.zeros((4, 2)), y_train=np.zeros(4)), "no array x_test, y_test"),
    (dict(x_train=np.zeros((4, 2)), y_train=np.zeros(3), x_test=np.zeros((1, 2)), y_test=[0]), "expected (4,)"),
    (dict(x_train=np.zeros((4, 2)), y_train=[0, 1, -1, 0], x_test=np.zeros((1, 2)), y_test=[0]), "label -1"),
    (dict(x_train=np.zeros((4, 2)), y_train=[0, 1.5, 0, 0], x_test=np.zeros((1, 2)), y_test=[0]), "non-integer"),
    (dict(x_train=np.zeros((4, 2)), y_train=[0, 1, 0, 1], x_test=np.zeros((1, 3)), y_test=[0]), "expected the same"),
    (dict(x_train=np.zeros((4, 1, 1, 1, 2)), y_train=[0, 1, 0, 1], x_test=np.zeros((1, 2)), y_test=[0]), "(N, C, H, W)"),
    (dict(x_train=np.full((4, 2), np.nan), y_train=[0, 1, 0, 1], x_test=np.zeros((1, 2)), y_test=[0]), "NaN"),
    (dict(x_train=np.array([None] * 4, dtype=object), y_train=[0, 1, 0, 1], x_test=np.zeros((1, 2)), y_test=[0]),
     "plain numeric"),
])
def test_npz_bad_arrays_are_one_line_naming_the_file(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(DatasetError) as e:
        load_dataset("npz", tmp_path)
    assert message in str(e.value) and str(tmp_path / "bad.npz") in str(e.value) and "\n" not in str(e.value)


def test_npz_which_file_one_two_none_missing_or_not_an_archive(tmp_path):
    with pytest.raises(DatasetError, match="holds no .npz file"):
        load_dataset("npz", tmp_path)
    make_npz(tmp_path / "a.npz")
    make_npz(tmp_path / "b.npz")
    with pytest.raises(DatasetError, match=r"holds 2 .npz files \(a.npz, b.npz\).*data.file"):
        load_dataset("npz", tmp_path)
    assert load_dataset("npz", tmp_path, file="b.npz").source["file"].endswith("b.npz")
    with pytest.raises(DatasetError, match="missing file .*c.npz"):
        load_dataset("npz", tmp_path, file="c.npz")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.npz").write_text("not a zip")
    with pytest.raises(DatasetError, match=r"d.npz: not a readable .npz archive"):
        load_dataset("npz", tmp_path / "sub")


# --------------------------------------------------------------------------------------- image folder


def test_image_folder_classes_sorted_split_held_out_per_class_and_recorded(tmp_path):
    root = make_image_folder(tmp_path / "imgs", n_per_class=10, classes=("dog", "cat", "fox"))
    (root / "cat" / "notes.txt").write_text("ignored")
    ds = load_dataset("image_folder", root)
    assert ds.class_names == ("cat", "dog", "fox") and ds.n_classes == 3
    assert ds.input_shape == (1, 12, 10)  # grayscale, H x W as saved
    assert np.bincount(ds.y_test).tolist() == [2, 2, 2] and np.bincount(ds.y_train).tolist() == [8, 8, 8]
    assert ds.source["channels"] == 1 and ds.source["resized"] is False
    again = load_dataset("image_folder", root)  # the held-out split does not depend on anything but the files
    np.testing.assert_array_equal(ds.x_test, again.x_test)
    assert load_dataset("image_folder", root, test_fraction=0.5).y_test.tolist().count(0) == 5


def test_image_folder_resizes_rgb_to_the_stated_shape_and_reads_train_test_folders(tmp_path):
    make_image_folder(tmp_path / "r" / "train", n_per_class=4, mode="RGB", sizes=((10, 12), (20, 7)), ext=".jpg")
    make_image_folder(tmp_path / "r" / "val", n_per_class=2, classes=("dog",), mode="RGB", sizes=((5, 5),))
    ds = load_dataset("image_folder", tmp_path / "r", image_size=[6, 8])
    assert ds.input_shape == (3, 6, 8) and len(ds.y_train) == 12 and ds.y_test.tolist() == [1, 1]
    assert ds.source["layout"].startswith("train/ and val/") and ds.source["resample"] == "bilinear"


def test_image_folder_normalisation_is_the_train_pixels_mean_and_std(tmp_path):
    for k, value in enumerate((0, 255)):
        (tmp_path / f"c{k}").mkdir()
        for i in range(2):
            Image.fromarray(np.full((2, 2), value, np.uint8), "L").save(tmp_path / f"c{k}" / f"{i}.png")
    ds = load_dataset("image_folder", tmp_path)  # 1 train + 1 test per class: pixels 0 and 1, mean 0.5, std 0.5
    assert ds.mean == pytest.approx((0.5,)) and ds.std == pytest.approx((0.5,))
    assert sorted(ds.x_train[:, 0, 0, 0].tolist()) == [-1.0, 1.0]


@pytest.mark.parametrize("spoil, message", [
    (lambda root: (root / "cat" / "000.png").write_bytes(b"\x89PNG broken"), "cat/000.png: not a readable image"),
    (lambda root: (root / "empty").mkdir(), "empty: class folder holds no image"),
    (lambda root: Image.fromarray(np.zeros((3, 3), np.uint8)).save(root / "dog" / "zz.png"), "expected one size"),
])
def test_image_folder_bad_files_are_one_line_naming_the_file(tmp_path, spoil, message):
    root = make_image_folder(tmp_path / "imgs", n_per_class=4)
    spoil(root)
    with pytest.raises(DatasetError) as e:
        load_dataset("image_folder", root)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_image_folder_without_class_folders_is_one_line(tmp_path):
    with pytest.raises(DatasetError, match="holds no class subfolder"):
        load_dataset("image_folder", tmp_path)


# ---------------------------------------------------------------------------------- scenario keys


@pytest.mark.parametrize("table, message", [
    (dict(dataset="digits", file="x.npz"), "only dataset = 'npz' reads it"),
    (dict(dataset="npz", data_dir="d", image_size=[8, 8]), "only dataset = 'image_folder' reads it"),
    (dict(dataset="image_folder", data_dir="d", image_size=[8]), "[H, W]"),
    (dict(dataset="image_folder", data_dir="d", image_size=[8, 0]), "[H, W]"),
    (dict(dataset="image_folder", data_dir="d", test_fraction=1.0), "(0, 1)"),
])
def test_the_loader_keys_are_checked_and_belong_to_their_data_set(table, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        DataConfig(**table)
    assert DataConfig(dataset="npz", data_dir="d", file="x.npz").loader_options() == {"file": "x.npz"}
    assert DataConfig(dataset="digits").loader_options() == {}


# ----------------------------------------------------------------------- partitions and end to end

PARTITION_KEYS = {"subset": dict(n_clusters=2, size_scale=0.1), "normal": dict(n_clusters=2, size_scale=0.05),
                  "labels_at_server": dict(server_labeled=40), "labels_at_server_iid": dict(server_labeled=40),
                  "feddure_iid_iid": dict(labels_per_class=2), "feddure_iid_dir": dict(labels_per_class=2),
                  "feddure_dir_dir": dict(labels_per_class=2), "iid": dict(labeled_fraction=0.5)}


@pytest.mark.parametrize("partition", PARTITIONS.names)
def test_every_partition_splits_an_npz_data_set(tmp_path, partition):
    from edgesim.learning.context import make_partition

    make_npz(tmp_path / "d.npz", n_train=4000, n_test=200)
    ds = load_dataset("npz", tmp_path)
    cfg = DataConfig(dataset="npz", data_dir=str(tmp_path), partition=partition, **PARTITION_KEYS.get(partition, {}))
    server, splits = make_partition(ds, cfg, 5, np.random.default_rng(0))
    assert len(splits) == 5 and all(len(s.train) + len(s.labeled) + len(s.unlabeled) > 0 for s in splits)
    held = np.concatenate([np.concatenate([s.train, s.labeled, s.unlabeled]) for s in splits])
    assert held.max() < len(ds.y_train)


@pytest.mark.parametrize("kind", ["npz", "npz_features", "image_folder"])
@pytest.mark.filterwarnings("ignore:.*local step:UserWarning")  # a few images a device on purpose: the run's warning
def test_the_default_algorithms_run_end_to_end_on_a_users_data(tmp_path, kind):
    import edgesim

    train = {}
    if kind.startswith("npz"):
        make_npz(tmp_path / "data" / "mine.npz", shape=(1, 8, 8) if kind == "npz" else (12,))
        data = {"dataset": "npz", "data_dir": str(tmp_path / "data"), "file": "mine.npz"}
        train = {} if kind == "npz" else {"train": {"model": "mlp"}}
    else:
        make_image_folder(tmp_path / "data", n_per_class=20, mode="RGB", sizes=((9, 9), (11, 7)))
        data = {"dataset": "image_folder", "data_dir": str(tmp_path / "data"), "image_size": [8, 8]}
    run = edgesim.run(None, tmp_path / "out", seed=1, data={**data, "partition": "dirichlet", "alpha": 1.0},
                      system={"n_devices": 4}, budget={"rounds": 2},
                      run={"algorithms": ["fedavg", "fedprox", "local"], "clients_per_round": 2}, **train)
    frame = run.rounds
    assert sorted(set(frame["algorithm"])) == ["fedavg", "fedprox", "local"] and frame["accuracy"].notna().all()
    record = json.loads((tmp_path / "out" / "summary.json").read_text())["dataset"]
    assert record["format"] == data["dataset"] and sum(record["class_counts_train"]) == record["n_train"]
    assert len(record["normalisation"]["mean"]) == {"npz": 1, "npz_features": 12, "image_folder": 3}[kind]
    config = (tmp_path / "out" / "config.toml").read_text()
    assert f'dataset = "{data["dataset"]}"' in config


def test_a_bad_user_file_in_a_run_is_one_config_error_line(tmp_path):
    import edgesim

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.npz").write_bytes(b"garbage")
    with pytest.raises(ConfigError) as e:
        edgesim.run(None, tmp_path / "out", data={"dataset": "npz", "data_dir": str(tmp_path / "data")},
                    system={"n_devices": 4}, budget={"rounds": 1}, run={"algorithms": ["fedavg"], "clients_per_round": 2})
    assert "mine.npz: not a readable .npz archive" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------------- the views' flip


def test_each_data_set_declares_its_flip_and_a_users_data_never_mirrors_by_default():
    """The built-in sets keep their rule (natural images flip, digits and OrganMNIST do not); npz, image_folder and
    a plugin's data set (a DatasetSpec that says nothing) never flip unless [data] hflip = true; either way the
    scenario's value wins."""
    from edgesim.learning.data.datasets import DatasetSpec

    assert {d: DataConfig(dataset=d).hflip for d in ("cifar10", "fashion_mnist", "digits", "organamnist")} == {
        "cifar10": True, "fashion_mnist": True, "digits": False, "organamnist": False}
    assert DataConfig(dataset="npz").hflip is False and DataConfig(dataset="image_folder").hflip is False
    assert DatasetSpec("mine", "a plugin's set", "image", lambda d: None).hflip_preserves_labels is False
    assert DataConfig(dataset="npz", hflip=True).hflip is True and DataConfig(dataset="cifar10", hflip=False).hflip is False
    with pytest.raises(ConfigError, match=r"hflip.*'yes'.*true or false") as e:
        DataConfig(dataset="npz", hflip="yes")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("hflip", [None, True])
def test_an_npz_run_never_mirrors_unless_asked(tmp_path, hflip):
    """FixMatch's weak and strong views on a user's .npz hold a Flip stage only with [data] hflip = true; the
    resolved value is what config.toml records, and the run says it once at its start."""
    import tomllib

    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.algorithms.fedavg.algorithm import make_task
    from edgesim.learning.augment import Flip
    from edgesim.learning.context import build_context
    from edgesim.scenarios.algorithm_run import resolved_config
    from edgesim.scenarios.run import views_line
    from edgesim.scenarios.schema import validate

    make_npz(tmp_path / "data" / "mine.npz", shape=(1, 8, 8))
    data = {"dataset": "npz", "data_dir": str(tmp_path / "data"), "partition": "iid", "labeled_fraction": 0.5,
            **({} if hflip is None else {"hflip": hflip})}
    sc = validate({"seed": 1, "data": data, "system": {"n_devices": 2}, "budget": {"rounds": 1},
                   "run": {"algorithms": ["fixavg"], "clients_per_round": 2}}, "user.toml")
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    task = make_task(ctx, REGISTRY["fixavg"].config_cls())
    mirrored = {v.out: any(isinstance(s, Flip) for s in v.augmentation.stages) for v in task.views}
    assert mirrored == dict.fromkeys(("x_aug", "u_weak", "u_strong"), bool(hflip))
    recorded = tomllib.loads(__import__("tomli_w").dumps(resolved_config(sc)))["data"]["hflip"]
    assert recorded is bool(hflip)
    line = views_line(sc)
    assert f"[data] hflip = {str(bool(hflip)).lower()}" in line and ("flip (p = 1/2)" in line) is bool(hflip)
    assert ("as the scenario sets" if hflip else "the rule of dataset = 'npz'") in line
