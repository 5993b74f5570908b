"""samediff.datasets: IDX reading/writing, MNIST from a directory, scikit-learn's digits."""
from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from samediff.datasets import IDX_DTYPES, load_digits, load_mnist, read_idx, write_idx
from samediff.errors import DatasetError, NdError

CODES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.int16, 0x0C: np.int32, 0x0D: np.float32,
         0x0E: np.float64}


def _sample(dtype, shape=(3, 4, 5)):
    rng = np.random.default_rng(0)
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    values.flat[:2] = info.min, info.max  # the extremes survive the byte swap
    return values


def _header(code, *dims):
    return bytes([0, 0, code, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)


def test_codes_match_the_format():
    assert {c: dt.newbyteorder("=") for c, dt in IDX_DTYPES.items()} == \
        {c: np.dtype(t) for c, t in CODES.items()}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("code", sorted(CODES), ids=[f"0x{c:02X}" for c in sorted(CODES)])
def test_round_trip_every_dtype(tmp_path, code, gz):
    array = _sample(CODES[code])
    path = tmp_path / ("a.idx.gz" if gz else "a.idx")
    write_idx(path, array)
    raw = path.read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == gz
    data = gzip.decompress(raw) if gz else raw
    assert data[:4] == bytes([0, 0, code, 3]) and data[4:16] == _header(code, 3, 4, 5)[4:]
    back = read_idx(path)
    assert back.dtype == np.dtype(CODES[code]) and back.dtype.isnative
    assert back.flags.writeable
    np.testing.assert_array_equal(back, array)
    assert os.listdir(tmp_path) == [path.name]  # the temporary file was renamed, none left


def test_round_trip_other_ranks_and_byte_orders(tmp_path):
    for array in (np.array(7, np.int32), np.zeros((0, 3), np.uint8),
                  np.arange(6, dtype=">f8").reshape(2, 3), np.arange(6, dtype="<i2")[::2]):
        write_idx(tmp_path / "x", array)
        back = read_idx(tmp_path / "x")
        assert back.shape == array.shape and back.dtype.isnative
        np.testing.assert_array_equal(back, array)


def test_hand_built_uint8_file(tmp_path):
    # magic 0 0, code 0x08, 2 dims; dims 2 and 3 big-endian; then 6 data bytes
    raw = bytes([0x00, 0x00, 0x08, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
                 0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF])
    (tmp_path / "hand").write_bytes(raw)
    np.testing.assert_array_equal(read_idx(tmp_path / "hand"),
                                  np.array([[0, 1, 127], [128, 254, 255]], np.uint8))
    write_idx(tmp_path / "ours", np.array([[0, 1, 127], [128, 254, 255]], np.uint8))
    assert (tmp_path / "ours").read_bytes() == raw
    # gzip is found by its magic bytes, not the name
    (tmp_path / "nogzname").write_bytes(gzip.compress(raw))
    assert read_idx(str(tmp_path / "nogzname")).tolist() == [[0, 1, 127], [128, 254, 255]]


def test_big_endian_data_is_decoded(tmp_path):
    (tmp_path / "i").write_bytes(_header(0x0C, 2) + bytes([0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFE]))
    assert read_idx(tmp_path / "i").tolist() == [258, -2]
    (tmp_path / "f").write_bytes(_header(0x0D, 1) + np.array([1.5], ">f4").tobytes())
    assert read_idx(tmp_path / "f").tolist() == [1.5]


@pytest.mark.parametrize("raw, message", [
    (_header(0x08, 2, 3) + bytes(5), "truncated"),
    (_header(0x0E, 4) + bytes(31), "truncated"),
    (_header(0x08, 2, 3)[:7], "truncated header"),
    (b"\x00\x00", "only 2 bytes"),
    (b"", "only 0 bytes"),
    (bytes([1, 0, 0x08, 1, 0, 0, 0, 1, 9]), "bad magic"),
    (b"PK\x03\x04junk", "bad magic"),
    (_header(0x0A, 1) + bytes(1), "unknown IDX type code 0x0A"),
    (_header(0x08, 2, 3) + bytes(8), "2 trailing bytes"),
    (_header(0xFF, 1) + bytes(1), "0xFF"),
    (_header(0x0E, 2 ** 32 - 1, 2 ** 32 - 1, 2 ** 32 - 1), "truncated"),  # no overflow, no alloc
])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_malformed_files_raise_named_errors(tmp_path, raw, message, gz):
    path = tmp_path / "bad-idx1-ubyte"
    path.write_bytes(gzip.compress(raw) if gz else raw)
    with pytest.raises(DatasetError, match=message) as info:
        read_idx(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, (NdError, ValueError))


def test_damaged_gzip_and_missing_file(tmp_path):
    data = gzip.compress(_header(0x08, 100) + bytes(100))
    (tmp_path / "cut.gz").write_bytes(data[:-12])
    with pytest.raises(DatasetError, match="cut.gz.*does not decompress"):
        read_idx(tmp_path / "cut.gz")
    with pytest.raises(DatasetError, match="no such file"):
        read_idx(tmp_path / "absent")


def test_write_rejects_what_idx_cannot_hold(tmp_path):
    for bad in (np.arange(3, dtype=np.int64), np.array([True]), np.zeros(2, np.float16)):
        with pytest.raises(DatasetError, match="cannot store dtype"):
            write_idx(tmp_path / "x", bad)
    assert os.listdir(tmp_path) == []  # refused before any file was created


def _write_mnist(folder, n_train=10, n_test=4, spelling="{}-{}-idx{}-ubyte", suffix=""):
    rng = np.random.default_rng(1)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        write_idx(folder / (spelling.format(split, "images", 3) + suffix), images)
        write_idx(folder / (spelling.format(split, "labels", 1) + suffix), labels)
        arrays[split] = images, labels
    return arrays


@pytest.mark.parametrize("spelling, suffix", [("{}-{}-idx{}-ubyte", ""),
                                              ("{}-{}-idx{}-ubyte", ".gz"),
                                              ("{}-{}.idx{}-ubyte", ".gz")])
def test_load_mnist(tmp_path, spelling, suffix):
    arrays = _write_mnist(tmp_path, spelling=spelling, suffix=suffix)
    x_train, y_train, x_test, y_test = load_mnist(tmp_path)
    assert x_train.shape == (10, 784) and x_test.shape == (4, 784)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int64
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0
    np.testing.assert_allclose(x_train * 255, arrays["train"][0].reshape(10, 784), atol=1e-4)
    np.testing.assert_array_equal(y_train, arrays["train"][1])
    np.testing.assert_array_equal(y_test, arrays["t10k"][1])
    np.testing.assert_allclose(x_test[2], arrays["t10k"][0][2].ravel() / 255.0, rtol=1e-6)


def test_load_mnist_lists_what_is_missing(tmp_path):
    _write_mnist(tmp_path)
    os.remove(tmp_path / "t10k-images-idx3-ubyte")
    os.remove(tmp_path / "train-labels-idx1-ubyte")
    with pytest.raises(DatasetError) as info:
        load_mnist(tmp_path)
    text = str(info.value)
    assert "test images" in text and "training labels" in text and "t10k-images-idx3-ubyte" in text
    assert "training images" not in text and str(tmp_path) in text
    with pytest.raises(DatasetError, match="not a directory"):
        load_mnist(tmp_path / "nowhere")


def test_load_mnist_checks_counts_and_kinds(tmp_path):
    _write_mnist(tmp_path)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(9, np.uint8))
    with pytest.raises(DatasetError, match="9 labels.*10 images"):
        load_mnist(tmp_path)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(10, np.uint8))
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((10, 784), np.float32))
    with pytest.raises(DatasetError, match="expected uint8 images"):
        load_mnist(tmp_path)


def test_load_digits():
    pytest.importorskip("sklearn")
    x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
    assert x_train.shape == (1438, 64) and x_test.shape == (359, 64)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int64
    assert x_train.min() == 0.0 and x_train.max() == 1.0
    assert sorted(np.unique(y_test)) == list(range(10))
    assert np.abs(np.bincount(y_test) - 36).max() <= 1  # stratified: about 20% of each class
    again = load_digits(test_fraction=0.2, seed=0)
    for a, b in zip((x_train, y_train, x_test, y_test), again):
        np.testing.assert_array_equal(a, b)
    other = load_digits(test_fraction=0.2, seed=1)
    assert not np.array_equal(other[1], y_train)
    from sklearn.datasets import load_digits as sklearn_digits
    raw = sklearn_digits()
    rows = np.concatenate([x_train, x_test]) * 16  # every image exactly once, with its label
    order = np.lexsort(np.column_stack([rows, np.concatenate([y_train, y_test])]).T)
    raw_order = np.lexsort(np.column_stack([raw.data, raw.target]).T)
    np.testing.assert_array_equal(rows[order], raw.data[raw_order])
    np.testing.assert_array_equal(np.concatenate([y_train, y_test])[order], raw.target[raw_order])
    with pytest.raises(DatasetError, match="test_fraction"):
        load_digits(test_fraction=1.0)


def test_load_digits_without_sklearn(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    with pytest.raises(DatasetError, match="pip install scikit-learn"):
        load_digits()
