"""Data set loaders (learning/data/: one module per format, named in datasets.py): the real IDX files, tiny files of every other format, and errors
that name the file and what was expected."""

import gzip
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from edgesim.learning.data.cifar import load_cifar
from edgesim.learning.data.dataset import Dataset, DatasetError, byte_counts
from edgesim.learning.data.datasets import DATASET_NAMES, load_dataset
from edgesim.learning.data.dbpedia import load_dbpedia
from edgesim.learning.data.digits import load_digits
from edgesim.learning.data.idx import load_idx, load_mnist
from edgesim.learning.data.medmnist import load_medmnist
from edgesim.learning.data.synthetic import make_synthetic
from edgesim.learning.data.tokens import build_vocab, encode, to_offsets, tokenize

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FMNIST_DIR = SHARED_DATA / "fashion-mnist"
needs_real_data = pytest.mark.skipif(
    not (FMNIST_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason=f"the real IDX files are not at {SHARED_DATA} (see shared/data/README.md)")


def idx_bytes(array: np.ndarray) -> bytes:
    """Encode a uint8 array as IDX: 0x0000 08 NDIM, big-endian dims, data."""
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


# --- real Fashion-MNIST / MNIST ---------------------------------------------


@pytest.fixture(scope="module")
def fmnist():
    return load_mnist(SHARED_DATA, "fashion_mnist")


@needs_real_data
def test_fashion_mnist_shapes_dtypes_and_class_counts(fmnist):
    assert fmnist.name == "fashion_mnist" and fmnist.kind == "image" and fmnist.n_classes == 10
    assert fmnist.x_train.shape == (60000, 1, 28, 28) and fmnist.x_train.dtype == np.float32
    assert fmnist.x_test.shape == (10000, 1, 28, 28) and fmnist.x_test.dtype == np.float32
    assert fmnist.y_train.dtype == np.int64 and fmnist.y_test.dtype == np.int64
    assert np.bincount(fmnist.y_train).tolist() == [6000] * 10  # data README: 6000 per class
    assert np.bincount(fmnist.y_test).tolist() == [1000] * 10
    assert fmnist.class_names[0] == "T-shirt/top" and fmnist.class_names[9] == "Ankle boot"
    assert fmnist.input_shape == (1, 28, 28)


@needs_real_data
def test_fashion_mnist_is_normalised_with_train_statistics(fmnist):
    assert fmnist.mean[0] == pytest.approx(0.2860, abs=1e-4)  # the well-known Fashion-MNIST statistics
    assert fmnist.std[0] == pytest.approx(0.3530, abs=1e-4)
    assert float(fmnist.x_train.mean(dtype=np.float64)) == pytest.approx(0.0, abs=1e-4)
    assert float(fmnist.x_train.std(dtype=np.float64)) == pytest.approx(1.0, abs=1e-4)
    # pixel 0 (black) maps to -mean/std in both splits
    assert fmnist.x_test.min() == pytest.approx(-fmnist.mean[0] / fmnist.std[0], rel=1e-5)


@needs_real_data
def test_mnist_through_load_dataset_matches_published_class_counts():
    ds = load_dataset("mnist", SHARED_DATA)
    assert ds.name == "mnist" and ds.x_train.shape == (60000, 1, 28, 28)
    assert np.bincount(ds.y_train).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert np.bincount(ds.y_test).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


@needs_real_data
def test_load_idx_reads_a_real_label_file():
    labels = load_idx(FMNIST_DIR / "t10k-labels-idx1-ubyte.gz")
    assert labels.shape == (10000,) and labels.dtype == np.uint8 and labels.max() == 9


@needs_real_data
def test_recompressed_copy_is_accepted_by_content_md5(tmp_path, fmnist):
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        (tmp_path / name).symlink_to(FMNIST_DIR / name)
    raw = gzip.decompress((FMNIST_DIR / "t10k-labels-idx1-ubyte.gz").read_bytes())
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(raw, compresslevel=1, mtime=0))
    ds = load_mnist(tmp_path, "fashion_mnist")
    np.testing.assert_array_equal(ds.y_test, fmnist.y_test)


@needs_real_data
def test_mnist_files_under_fashion_name_fail_the_md5_check(tmp_path):
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        (tmp_path / name).symlink_to(FMNIST_DIR / name)
    shutil.copy(SHARED_DATA / "mnist" / "t10k-labels-idx1-ubyte.gz", tmp_path)
    with pytest.raises(DatasetError, match=r"t10k-labels-idx1-ubyte\.gz: md5 ec29112d.* does not match the published "
                                            r"bb300cfd.*not Fashion-MNIST"):
        load_mnist(tmp_path, "fashion_mnist")


# --- IDX errors on tiny files ---------------------------------------------------


def test_load_idx_round_trip_raw_and_gzip(tmp_path):
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "a-idx3-ubyte").write_bytes(idx_bytes(array))
    (tmp_path / "a-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(array)))
    np.testing.assert_array_equal(load_idx(tmp_path / "a-idx3-ubyte"), array)
    out = load_idx(tmp_path / "a-idx3-ubyte.gz")
    np.testing.assert_array_equal(out, array)
    out[0, 0, 0] = 7  # a writable copy, not a view of the file buffer


def test_load_idx_missing_file(tmp_path):
    with pytest.raises(DatasetError, match=r"missing file .*nope-idx1-ubyte: expected an IDX file"):
        load_idx(tmp_path / "nope-idx1-ubyte")


def test_load_idx_corrupt_gzip(tmp_path):
    path = tmp_path / "bad.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really deflate data" * 3)
    with pytest.raises(DatasetError, match=r"bad\.gz: corrupt gzip stream .*expected an IDX file"):
        load_idx(path)


def test_load_idx_truncated_gzip(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((50, 20), np.uint8)))[:-12])
    with pytest.raises(DatasetError, match=r"cut\.gz: corrupt gzip stream"):
        load_idx(path)


def test_load_idx_wrong_magic(tmp_path):
    path = tmp_path / "x.idx"
    path.write_bytes(b"\x12\x34\x08\x01" + bytes(8))
    with pytest.raises(DatasetError, match=r"x\.idx: bad IDX magic 0x12340801; expected 0x000008NN"):
        load_idx(path)


def test_load_idx_wrong_type_byte(tmp_path):
    path = tmp_path / "f.idx"
    path.write_bytes(b"\x00\x00\x0d\x01" + struct.pack(">I", 1) + bytes(4))  # 0x0D = float
    with pytest.raises(DatasetError, match=r"f\.idx: IDX type byte 0x0d .*expected 0x08"):
        load_idx(path)


def test_load_idx_truncated_data(tmp_path):
    path = tmp_path / "t.idx"
    path.write_bytes(idx_bytes(np.zeros((3, 2, 2), np.uint8))[:-2])
    with pytest.raises(DatasetError, match=r"t\.idx: IDX data truncated: 10 bytes .*expected 12 \(= 3 x 2 x 2"):
        load_idx(path)


def test_load_idx_trailing_bytes(tmp_path):
    path = tmp_path / "long.idx"
    path.write_bytes(idx_bytes(np.zeros(5, np.uint8)) + b"\x00")
    with pytest.raises(DatasetError, match=r"long\.idx: IDX data has trailing bytes: 6 bytes .*expected 5"):
        load_idx(path)


def test_load_mnist_missing_file_names_the_four_files(tmp_path):
    with pytest.raises(DatasetError, match=r"missing file .*train-images-idx3-ubyte\.gz: expected the four IDX files "
                                            r"of Fashion-MNIST .*t10k-labels-idx1-ubyte\.gz"):
        load_mnist(tmp_path, "fashion_mnist")


def test_load_mnist_md5_mismatch_on_tiny_files(tmp_path):
    folder = tmp_path / "fashion-mnist"  # the canonical subfolder is searched too
    folder.mkdir()
    for stem, shape in (("train-images-idx3-ubyte", (2, 28, 28)), ("train-labels-idx1-ubyte", (2,)),
                        ("t10k-images-idx3-ubyte", (1, 28, 28)), ("t10k-labels-idx1-ubyte", (1,))):
        (folder / (stem + ".gz")).write_bytes(gzip.compress(idx_bytes(np.zeros(shape, np.uint8))))
    with pytest.raises(DatasetError, match=r"fashion-mnist/train-images-idx3-ubyte\.gz: md5 [0-9a-f]{32} does not "
                                            r"match the published 8d4fb7e6c68d591d4c3dfef9ec88bf0d .*corrupt or not "
                                            r"Fashion-MNIST"):
        load_mnist(tmp_path, "fashion_mnist")


def test_load_mnist_corrupt_gzip_under_canonical_name(tmp_path):
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (tmp_path / (stem + ".gz")).write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(DatasetError, match=r"train-images-idx3-ubyte\.gz: md5 .* does not match the published "
                                            r"f68b3c2d.* corrupt gzip stream .*not MNIST"):
        load_mnist(tmp_path, "mnist")


# --- CIFAR --------------------------------------------------------------------


def write_pickle(path: Path, obj, protocol=2):
    path.write_bytes(pickle.dumps(obj, protocol=protocol))


def cifar_batch(rng, n, n_classes, label_key=b"labels"):
    return {b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
            label_key: rng.integers(0, n_classes, size=n).tolist(), b"batch_label": b"tiny"}


@pytest.fixture
def cifar10_dir(tmp_path):
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    batches = {f"data_batch_{i}": cifar_batch(rng, 4, 10) for i in range(1, 6)}
    batches["test_batch"] = cifar_batch(rng, 3, 10)
    for name, batch in batches.items():
        write_pickle(folder / name, batch)
    return tmp_path, batches


def test_load_cifar10_from_tiny_pickles(cifar10_dir):
    root, batches = cifar10_dir
    ds = load_cifar(root, 10)
    assert ds.name == "cifar10" and ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (3, 3, 32, 32)
    assert ds.x_train.dtype == np.float32 and ds.class_names[0] == "airplane"
    raw = np.concatenate([batches[f"data_batch_{i}"][b"data"] for i in range(1, 6)])
    assert ds.y_train.tolist() == sum((batches[f"data_batch_{i}"][b"labels"] for i in range(1, 6)), [])
    # rows are R(1024) G(1024) B(1024): undo the normalisation and compare with the raw bytes
    mean, std = np.array(ds.mean)[None, :, None, None], np.array(ds.std)[None, :, None, None]
    np.testing.assert_allclose((ds.x_train * std + mean) * 255, raw.reshape(20, 3, 32, 32), atol=1e-3)
    np.testing.assert_allclose(ds.x_train.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    # the folder itself works as data_dir too
    assert load_cifar(root / "cifar-10-batches-py", 10).x_train.shape == (20, 3, 32, 32)


def test_load_cifar100_fine_labels_and_protocol5(tmp_path):
    rng = np.random.default_rng(2)
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    train = cifar_batch(rng, 6, 100, b"fine_labels") | {b"coarse_labels": [0] * 6}
    test = {k.decode(): v for k, v in cifar_batch(rng, 2, 100, b"fine_labels").items()}  # str keys also work
    write_pickle(folder / "train", train)
    write_pickle(folder / "test", test, protocol=5)
    ds = load_dataset("cifar100", tmp_path)
    assert ds.n_classes == 100 and len(ds.class_names) == 100 and ds.class_names[:2] == ("apple", "aquarium_fish")
    assert ds.y_train.tolist() == train[b"fine_labels"] and ds.y_test.tolist() == test["fine_labels"]


def test_cifar_missing_batch(cifar10_dir):
    root, _ = cifar10_dir
    (root / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DatasetError, match=r"missing file .*cifar-10-batches-py/data_batch_3: expected the CIFAR-10 "
                                            r"python files \(data_batch_1, .*test_batch\)"):
        load_cifar(root, 10)


def test_cifar_label_out_of_range(cifar10_dir):
    root, batches = cifar10_dir
    batch = batches["test_batch"] | {b"labels": [0, 10, 3]}
    write_pickle(root / "cifar-10-batches-py" / "test_batch", batch)
    with pytest.raises(DatasetError, match=r"test_batch: b'labels' holds label 10 .*expected labels 0\.\.9"):
        load_cifar(root, 10)


def test_cifar_bad_shape(cifar10_dir):
    root, batches = cifar10_dir
    batch = batches["data_batch_2"] | {b"data": np.zeros((4, 3000), np.uint8)}
    write_pickle(root / "cifar-10-batches-py" / "data_batch_2", batch)
    with pytest.raises(DatasetError, match=r"data_batch_2: b'data' is uint8 \(4, 3000\); expected uint8 of shape "
                                            r"\(n, 3072\)"):
        load_cifar(root, 10)


def test_cifar_not_a_pickle_and_no_code_execution(cifar10_dir):
    root, _ = cifar10_dir
    (root / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"\x80\x02garbage")
    with pytest.raises(DatasetError, match=r"data_batch_1: cannot unpickle it .*expected a CIFAR-10 python batch"):
        load_cifar(root, 10)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    write_pickle(root / "cifar-10-batches-py" / "data_batch_1", {b"data": Evil()})
    with pytest.raises(DatasetError, match=r"data_batch_1: cannot unpickle it .*refusing to load global .*print"):
        load_cifar(root, 10)


def test_cifar_canonical_size_triggers_md5(cifar10_dir):
    root, _ = cifar10_dir
    (root / "cifar-10-batches-py" / "test_batch").write_bytes(bytes(31035526))  # the canonical size, wrong content
    with pytest.raises(DatasetError, match=r"test_batch: md5 [0-9a-f]{32} does not match the published "
                                            r"40351d587109b95175f43aff81a1287e .*not CIFAR-10"):
        load_cifar(root, 10)


# --- MedMNIST -----------------------------------------------------------------


def write_medmnist(path, rng, rgb, n_classes, n=(5, 2, 3), **override):
    arrays = {}
    for split, count in zip(("train", "val", "test"), n):
        shape = (count, 28, 28, 3) if rgb else (count, 28, 28)
        arrays[f"{split}_images"] = rng.integers(0, 256, size=shape, dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, n_classes, size=(count, 1))
    arrays.update(override)
    np.savez_compressed(path, **arrays)
    return arrays


def test_load_medmnist_rgb_and_grayscale(tmp_path):
    rng = np.random.default_rng(3)
    path_arrays = write_medmnist(tmp_path / "pathmnist.npz", rng, rgb=True, n_classes=9)
    organ_arrays = write_medmnist(tmp_path / "organamnist.npz", rng, rgb=False, n_classes=11)
    path = load_dataset("pathmnist", tmp_path)
    assert path.x_train.shape == (5, 3, 28, 28) and path.x_test.shape == (3, 3, 28, 28) and path.n_classes == 9
    assert path.y_train.tolist() == path_arrays["train_labels"][:, 0].tolist()
    mean, std = np.array(path.mean)[None, :, None, None], np.array(path.std)[None, :, None, None]
    np.testing.assert_allclose((path.x_train * std + mean) * 255,
                               path_arrays["train_images"].transpose(0, 3, 1, 2), atol=1e-3)
    organ = load_medmnist(tmp_path / "organamnist.npz", "organamnist", merge_val=True)
    assert organ.x_train.shape == (7, 1, 28, 28) and organ.n_classes == 11 and organ.class_names[0] == "bladder"
    assert organ.y_test.tolist() == organ_arrays["test_labels"][:, 0].tolist()


def test_medmnist_missing_file_missing_key_and_bad_labels(tmp_path):
    rng = np.random.default_rng(4)
    with pytest.raises(DatasetError, match=r"missing file .*pathmnist\.npz: expected the MedMNIST file pathmnist\.npz"):
        load_medmnist(tmp_path, "pathmnist")
    np.savez(tmp_path / "pathmnist.npz", train_images=np.zeros((2, 28, 28, 3), np.uint8))
    with pytest.raises(DatasetError, match=r"pathmnist\.npz: no array 'train_labels' .*expected a MedMNIST \.npz"):
        load_medmnist(tmp_path, "pathmnist")
    write_medmnist(tmp_path / "pathmnist.npz", rng, rgb=True, n_classes=9,
                   test_labels=np.array([[0], [9], [1]]))
    with pytest.raises(DatasetError, match=r"pathmnist\.npz: test_labels holds label 9 .*expected labels 0\.\.8"):
        load_medmnist(tmp_path, "pathmnist")
    write_medmnist(tmp_path / "pathmnist.npz", rng, rgb=False, n_classes=9)  # grayscale where RGB is expected
    with pytest.raises(DatasetError, match=r"pathmnist\.npz: train_images is uint8 \(5, 28, 28\); expected uint8 "
                                            r"\(n, s, s, 3\) RGB"):
        load_medmnist(tmp_path, "pathmnist")


def test_medmnist_corrupt_zip(tmp_path):
    (tmp_path / "organamnist.npz").write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(DatasetError, match=r"organamnist\.npz: cannot read it as \.npz .*expected a MedMNIST"):
        load_medmnist(tmp_path, "organamnist")


# --- DBPedia and token helpers ----------------------------------------------------

TRAIN_CSV = '''1,"Acme Corp","Acme is a company, founded in 1900."
9,"Smallville","Smallville is a village; a small village."
14,"The Book","A book about ""quotes"" and a village."
'''
TEST_CSV = '''2,"Some School","A school with zebras."
'''


@pytest.fixture
def dbpedia_dir(tmp_path):
    folder = tmp_path / "dbpedia_csv"
    folder.mkdir()
    (folder / "train.csv").write_text(TRAIN_CSV, encoding="utf-8")
    (folder / "test.csv").write_text(TEST_CSV, encoding="utf-8")
    return tmp_path


def test_tokenize_and_vocabulary_tie_break():
    assert tokenize("Zürich's A-B_c, 1900!") == ["zürich", "s", "a", "b", "c", "1900"]
    vocab = build_vocab(["b a c", "a b", "d"], vocab_size=5)
    assert vocab == {"a": 2, "b": 3, "c": 4}  # counts a=2, b=2 (tie → alphabetical), then c=1 before d=1


def test_load_dbpedia_tiny(dbpedia_dir):
    ds = load_dbpedia(dbpedia_dir, vocab_size=50, max_len=6)
    assert ds.kind == "text" and ds.n_classes == 14 and ds.class_names[0] == "Company"
    assert ds.y_train.tolist() == [0, 8, 13] and ds.y_test.tolist() == [1]
    assert ds.x_train.dtype == np.int64 and ds.x_train.shape == (3, 6)
    texts = ["Acme Corp Acme is a company, founded in 1900.", "Smallville Smallville is a village; a small village.",
             'The Book A book about "quotes" and a village.']
    vocab = build_vocab(texts, 50)
    assert ds.vocab_size == len(vocab) + 2
    np.testing.assert_array_equal(ds.x_train, encode(texts, vocab, 6))
    # "a" is the most frequent train token → id 2; test words never seen in train → 1 (unknown); padding 0
    assert vocab["a"] == 2
    assert ds.x_test[0].tolist() == [1, 1, 2, 1, 1, 1]  # "some school a school with zebras": only "a" is known
    short = load_dbpedia(dbpedia_dir, vocab_size=3, max_len=12)
    assert short.vocab_size == 3 and set(np.unique(short.x_train)) <= {0, 1, 2}
    assert short.x_test[0].tolist()[-6:] == [0] * 6  # 6 tokens, then padding


def test_to_offsets_matches_the_padded_rows():
    tokens = np.array([[5, 3, 0, 0], [0, 0, 0, 0], [7, 1, 2, 9]])
    flat, offsets = to_offsets(tokens)
    assert flat.tolist() == [5, 3, 7, 1, 2, 9] and offsets.tolist() == [0, 2, 2]
    assert flat.dtype == np.int64 and offsets.dtype == np.int64
    with pytest.raises(ValueError, match=r"expected a 2-D integer matrix"):
        to_offsets(np.zeros(3))


def test_dbpedia_bad_rows(dbpedia_dir):
    train = dbpedia_dir / "dbpedia_csv" / "train.csv"
    train.write_text(TRAIN_CSV + '3,"only two fields"\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"train\.csv:4: 2 fields; expected 3 fields: CSV rows "
                                            r"label\(1\.\.14\),title,content"):
        load_dbpedia(dbpedia_dir)
    train.write_text('15,"x","y"\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"train\.csv:1: label '15'; expected an integer 1\.\.14"):
        load_dbpedia(dbpedia_dir)
    train.write_bytes(b'1,"caf\xe9","latin-1, not utf-8"\n')
    with pytest.raises(DatasetError, match=r"train\.csv: .*not UTF-8"):
        load_dbpedia(dbpedia_dir)
    train.write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"train\.csv: no rows"):
        load_dbpedia(dbpedia_dir)
    train.unlink()
    with pytest.raises(DatasetError, match=r"missing file .*train\.csv: expected the DBPedia CSV files"):
        load_dbpedia(dbpedia_dir)


def test_dbpedia_canonical_size_triggers_sha256(dbpedia_dir):
    with open(dbpedia_dir / "dbpedia_csv" / "test.csv", "wb") as f:
        f.truncate(21775285)  # the canonical size of test.csv, wrong content
    with pytest.raises(DatasetError, match=r"test\.csv: sha256 [0-9a-f]{64} does not match the published "
                                            r"3d7b5fc0.* — the file is corrupt or not DBPedia"):
        load_dbpedia(dbpedia_dir)


# --- digits, synthetic, dispatch ------------------------------------------------


def test_digits_fixed_stratified_split():
    ds = load_digits()
    assert ds.x_train.shape == (1437, 1, 8, 8) and ds.x_test.shape == (360, 1, 8, 8)
    counts = np.bincount(ds.y_test)
    assert counts.sum() == 360 and counts.min() >= 35 and counts.max() <= 37  # stratified: 20 % of each class
    again = load_dataset("digits", None)
    np.testing.assert_array_equal(again.x_test, ds.x_test)
    assert float(ds.x_train.mean()) == pytest.approx(0.0, abs=1e-5)


def test_digits_are_scikit_learns_split_without_importing_it():
    """The recorded split is scikit-learn's ``train_test_split`` (stratified, random_state=0), the pixels its
    ``load_digits``; and loading them imports neither scikit-learn nor SciPy (a fresh interpreter)."""
    import subprocess
    import sys

    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split

    from edgesim.learning.data.dataset import image_dataset

    bunch = sk_digits()
    x, y = bunch.images[:, None], bunch.target.astype(np.int64)
    train, test = (np.sort(i) for i in train_test_split(np.arange(len(y)), test_size=0.2, stratify=y, random_state=0))
    want, got = image_dataset("digits", x[train], y[train], x[test], y[test], 10, None, 16.0), load_digits()
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(got, key), getattr(want, key))
    assert (got.mean, got.std) == (want.mean, want.std)
    probe = ("import sys; from edgesim.learning.data.digits import load_digits; load_digits(); "
             "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_synthetic_is_deterministic_and_balanced():
    a = make_synthetic(n_train=103, n_test=20, shape=(3, 4, 4), n_classes=5, seed=7)
    b = load_dataset("synthetic", None, n_train=103, n_test=20, shape=(3, 4, 4), n_classes=5, seed=7)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert a.x_train.shape == (103, 3, 4, 4) and a.n_classes == 5
    assert np.bincount(a.y_train).tolist() == [21, 21, 21, 20, 20]
    c = make_synthetic(n_train=103, n_test=20, shape=(3, 4, 4), n_classes=5, seed=8)
    assert not np.array_equal(a.x_train, c.x_train)
    with pytest.raises(ValueError, match=r"n_classes\(=1\) must be an integer >= 2"):
        make_synthetic(n_classes=1)


def test_load_dataset_errors(tmp_path):
    with pytest.raises(DatasetError, match=r"unknown dataset 'imagenet'; expected one of: .*fashion_mnist.*dbpedia"):
        load_dataset("imagenet", tmp_path)
    with pytest.raises(DatasetError, match=r"dataset 'cifar10' needs files on disk: give their folder as "
                                            r"⟨data-dir⟩, .*EDGESIM_DATA.*data\.data_dir"):
        load_dataset("cifar10", None)
    with pytest.raises(DatasetError, match=r"unknown option\(s\) vocab for dataset 'dbpedia'; expected: vocab_size"):
        load_dataset("dbpedia", tmp_path, vocab=5)
    with pytest.raises(DatasetError, match=r"data_dir .*nowhere is not a directory"):
        load_dataset("mnist", tmp_path / "nowhere")
    assert {"digits", "mnist", "fashion_mnist", "cifar10", "cifar100", "pathmnist", "organamnist", "dbpedia",
            "synthetic"} <= set(DATASET_NAMES)


def test_dataset_validates_its_arrays():
    x = np.zeros((2, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match=r"y_train is int64 with shape \(3,\); expected int64 of shape \(2,\)"):
        Dataset("t", "image", x, np.zeros(3, np.int64), x, np.zeros(2, np.int64), 2)
    with pytest.raises(ValueError, match=r"y_test holds labels 0\.\.5; expected 0\.\.1"):
        Dataset("t", "image", x, np.zeros(2, np.int64), x, np.array([0, 5]), 2)
    with pytest.raises(ValueError, match=r"kind\(='audio'\)"):
        Dataset("t", "audio", x, np.zeros(2, np.int64), x, np.zeros(2, np.int64), 2)



def test_load_cinic10_from_tiny_pngs(tmp_path):
    from PIL import Image

    from edgesim.learning.data.cinic import load_cinic10

    root = tmp_path / "cinic-10"
    classes = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
    for split, n in (("train", 2), ("test", 1), ("valid", 1)):
        for c, name in enumerate(classes):
            (root / split / name).mkdir(parents=True)
            for i in range(n):
                if name == "bird" and i == 0:  # a grayscale image, as CINIC-10 has some
                    Image.fromarray(np.full((32, 32), 7 * c, dtype=np.uint8), "L").save(root / split / name / f"{i}.png")
                else:
                    Image.fromarray(np.full((32, 32, 3), 7 * c, dtype=np.uint8), "RGB").save(root / split / name / f"{i}.png")
    ds = load_cinic10(tmp_path)
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (10, 3, 32, 32)
    assert ds.y_train.tolist() == [c for c in range(10) for _ in range(2)] and ds.n_classes == 10
    assert ds.class_names[2] == "bird" and len(ds.mean) == 3
    (root / "test" / "truck" / "0.png").unlink()
    Image.fromarray(np.zeros((16, 16, 3), dtype=np.uint8)).save(root / "test" / "truck" / "0.png")
    with pytest.raises(DatasetError, match="16x16 image; CINIC-10 images are 32x32"):
        load_cinic10(tmp_path)
    with pytest.raises(DatasetError, match="missing folders"):
        load_cinic10(tmp_path / "cinic-10" / "train")


def _numbered(n_train: int, n_test: int):
    """A 10-class image data set whose every image is filled with its own number (train i: i; test j: -1 - j)."""
    from edgesim.learning.data.dataset import Dataset

    def img(values):
        return np.repeat(np.asarray(values, np.float32)[:, None, None, None], 64, 1).reshape(-1, 1, 8, 8)

    return Dataset("numbered", "image", img(np.arange(n_train)), np.arange(n_train) % 10,
                   img(-1.0 - np.arange(n_test)), np.arange(n_test) % 10, 10)


def test_a_validation_split_replaces_the_test_split_and_leaves_the_devices_data_alone(tiny_scenario):
    """``[data] validation_size``: the images evaluated on are train images outside the pool, never test images,
    and every device trains on exactly what it holds without the option."""
    import torch

    from edgesim.learning.context import build_context
    from edgesim.scenarios.schema import load_scenario

    ds = _numbered(900, 300)

    def ctx(*overrides):
        sc = load_scenario(tiny_scenario, ["data.train_pool_size=500", *overrides])
        return build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                             sc.system.n_devices, dataset=ds)

    plain, val = ctx(), ctx("data.validation_size=200")
    pool = {int(v) for c in plain.clients for v in c.x_sup[:, 0, 0, 0].tolist() + c.x_unl[:, 0, 0, 0].tolist()}
    seen = set()
    for a, b in zip(plain.clients, val.clients):
        for key in ("x_sup", "y_sup", "x_lab", "y_lab", "x_unl"):
            assert torch.equal(getattr(a, key), getattr(b, key)), key
        assert (a.x_test < 0).all()  # the plain run evaluates on test images, the other on as many of each class
        assert torch.equal(torch.bincount(a.y_test, minlength=10), torch.bincount(b.y_test, minlength=10))
        ids = b.x_test[:, 0, 0, 0].tolist()
        assert all(v >= 0 and int(v) not in pool for v in ids)  # train images no device holds
        assert torch.equal(b.y_test, torch.as_tensor([int(v) % 10 for v in ids]).to(b.y_test.dtype))  # own labels
        seen |= {int(v) for v in ids}
    assert len(seen) <= 200


def test_a_validation_split_needs_room_outside_the_train_pool(tiny_scenario, tmp_path):
    from edgesim.config import ConfigError
    from edgesim.learning.context import build_context
    from edgesim.scenarios.schema import load_scenario

    with pytest.raises(ConfigError, match=r"validation_size.*train_pool_size"):
        load_scenario(tiny_scenario, ["data.validation_size=100"])
    sc = load_scenario(tiny_scenario, ["data.train_pool_size=800", "data.validation_size=200"])
    with pytest.raises(ValueError, match=r"validation_size\(=200\) exceeds the 100 training samples"):
        build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                      sc.system.n_devices, dataset=_numbered(900, 300))


def test_devices_that_share_a_test_set_share_their_validation_set(tiny_scenario):
    """Labels at the server: every device is tested on one global set, so they share one validation set too."""
    from edgesim.learning.context import build_context
    from edgesim.scenarios.schema import load_scenario

    sc = load_scenario(tiny_scenario, ['data.partition="labels_at_server"', "data.server_labeled=100",
                                       "data.train_pool_size=500", "data.validation_size=200", "data.test_size=60"])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices, dataset=_numbered(900, 300))
    first = ctx.clients[0].x_test
    assert len(first) and (first >= 0).all()
    assert all(c.x_test is first or bool((c.x_test == first).all()) for c in ctx.clients)


def test_byte_counts_by_hand_and_as_bincount():
    hand = byte_counts(np.array([0, 255, 255, 3, 255], dtype=np.uint8), chunk=2)  # chunks 2, 2 and the last 1
    assert hand.sum() == 5 and (hand[0], hand[3], hand[255]) == (1, 1, 3)
    assert byte_counts(np.zeros(0, dtype=np.uint8)).tolist() == [0] * 256
    rng = np.random.default_rng(0)
    for n, chunk in ((1, 4), (2, 1), (7, 3), (4096, 1000), (4097, 1 << 18)):
        x = rng.integers(0, 256, size=(n, 3), dtype=np.uint8)
        assert np.array_equal(byte_counts(x[:, 1], chunk), np.bincount(x[:, 1], minlength=256))  # not contiguous


def test_loaded_once_reads_each_data_set_once_within_its_scope(monkeypatch):
    from edgesim.learning.data import datasets

    a = load_dataset("synthetic", n_train=20, n_test=10)
    assert load_dataset("synthetic", n_train=20, n_test=10) is not a  # outside a scope: read again
    with datasets.loaded_once():
        b = load_dataset("synthetic", n_train=20, n_test=10)
        with datasets.loaded_once():  # nested: the outer scope's
            assert load_dataset("synthetic", n_train=20, n_test=10) is b
        assert load_dataset("synthetic", n_train=30, n_test=10) is not b  # other options, another data set
        assert load_dataset("synthetic", n_train=20, n_test=10) is b
    assert load_dataset("synthetic", n_train=20, n_test=10) is not b  # the scope let it go


def test_a_run_reads_its_data_set_once(monkeypatch, tiny_scenario, tmp_path):
    from edgesim.learning.data import datasets
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    reads = []
    real = datasets._load
    monkeypatch.setattr(datasets, "_load", lambda *a, **o: reads.append(a[0]) or real(*a, **o))
    run_scenario(load_scenario(tiny_scenario, ["budget.rounds=1", 'run.algorithms=["fedavg"]']), tmp_path / "r")
    assert reads == ["digits"]  # its plan, its model's size ("auto") and its context asked for it


def test_a_plan_reads_its_data_set_once(monkeypatch, tiny_scenario):
    from edgesim.learning.data import datasets
    from edgesim.scenarios.plan import plan_report
    from edgesim.scenarios.schema import load_scenario

    reads = []
    real = datasets._load
    monkeypatch.setattr(datasets, "_load", lambda *a, **o: reads.append(a[0]) or real(*a, **o))
    plan_report(load_scenario(tiny_scenario))
    assert reads == ["digits"]  # its model's size ("auto") and its local steps asked for it
