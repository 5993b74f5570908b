"""Datasets: the IDX file format (MNIST's), MNIST from a local directory, and the 8x8 digits.

Nothing here touches the network: ``load_mnist`` reads files you already have (plain or gzipped),
``load_digits`` uses the small digits set that ships inside scikit-learn. Everything returns
plain numpy arrays; wrap them with ``nd.create`` (zero copy) or feed them to ``sd.output``.

>>> import os, tempfile, numpy as np
>>> from samediff.datasets import read_idx, write_idx
>>> path = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte.gz")
>>> write_idx(path, np.array([3, 1, 4], dtype=np.uint8))
>>> read_idx(path).tolist()
[3, 1, 4]
"""
from __future__ import annotations

import gzip
import math
import os
import zlib
from typing import IO, Union

import numpy as np

from .atomic_file import write_atomically
from .errors import DatasetError

PathLike = Union[str, "os.PathLike[str]"]

# IDX type codes -> big-endian numpy dtypes (the format stores every multi-byte value big-endian).
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}
_CODE_OF = {(dt.kind, dt.itemsize): code for code, dt in IDX_DTYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _read_bytes(path: PathLike) -> bytes:
    """The file's content, gunzipped when it starts with the gzip magic (whatever its name)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise DatasetError(f"{os.fspath(path)}: no such file") from None
    except OSError as e:
        raise DatasetError(f"{os.fspath(path)}: cannot be read ({e.strerror or e})") from e
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise DatasetError(f"{os.fspath(path)}: starts like a gzip file but does not decompress "
                           f"({e}); the download is probably truncated or damaged") from e


def _parse_idx(data: bytes, where: str) -> np.ndarray:
    if len(data) < 4:
        raise DatasetError(f"{where}: not an IDX file: only {len(data)} bytes, the header alone "
                           f"needs at least 4")
    if data[0] != 0 or data[1] != 0:
        raise DatasetError(f"{where}: not an IDX file: bad magic {data[:4].hex(' ')} (an IDX file "
                           f"starts with two zero bytes, a type code and the number of dims)")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X} {dt.newbyteorder('=').name}" for c, dt in IDX_DTYPES.items())
        raise DatasetError(f"{where}: unknown IDX type code 0x{code:02X} (known: {known})")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"{where}: truncated header: {ndim} dims need {header} header bytes, "
                           f"the file has {len(data)}")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = math.prod(shape) * dtype.itemsize  # Python ints: a corrupt header cannot overflow
    got = len(data) - header
    if got != expected:
        what = "truncated" if got < expected else f"{got - expected} trailing bytes"
        raise DatasetError(f"{where}: {what}: shape {shape} of {dtype.newbyteorder('=').name} "
                           f"needs {expected} data bytes after the {header}-byte header, "
                           f"the file has {got}")
    flat = np.frombuffer(data, dtype, count=expected // dtype.itemsize, offset=header)
    return flat.astype(dtype.newbyteorder("=")).reshape(shape)  # a native-endian, writable copy


def read_idx(path: PathLike) -> np.ndarray:
    """Read an IDX file (the MNIST format), plain or gzip-compressed.

    The layout: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dims, each dim as a big-endian uint32, then the
    data, big-endian, row-major. Gzip is detected by the file's first bytes, not its name.

    Args:
        path: the file to read.

    Returns:
        A native-endian, writable numpy array of the file's shape and dtype.

    Raises:
        DatasetError: the file is missing, truncated, has a bad magic or an unknown type code,
            or has bytes after the data; the message names the file and the problem.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "x.idx")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes([0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6)))
    >>> read_idx(path)
    array([[0, 1, 2],
           [3, 4, 5]], dtype=uint8)
    """
    return _parse_idx(_read_bytes(path), os.fspath(path))


def write_idx(path: PathLike, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file, gzip-compressed when ``path`` ends with ``.gz``.

    The write is atomic: the data goes to a temporary file in the same directory, which then
    replaces ``path``, so readers never see a half-written file.

    Args:
        path: the file to write (created or replaced).
        array: anything ``np.asarray`` accepts, of dtype uint8, int8, int16, int32, float32 or
            float64 (the types IDX can hold), with at most 255 dims each < 2**32.

    Raises:
        DatasetError: the dtype or shape cannot be stored in IDX (cast first, e.g.
            ``labels.astype(np.uint8)``).

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "w.idx")
    >>> write_idx(path, np.eye(2, dtype=np.float32))
    >>> read_idx(path).dtype
    dtype('float32')
    """
    arr = np.asarray(array)
    code = _CODE_OF.get((arr.dtype.kind, arr.dtype.itemsize))
    if code is None:
        raise DatasetError(f"{os.fspath(path)}: IDX cannot store dtype {arr.dtype}; cast to one of "
                           f"uint8, int8, int16, int32, float32, float64 first")
    if arr.ndim > 255 or any(d >= 2 ** 32 for d in arr.shape):
        raise DatasetError(f"{os.fspath(path)}: IDX cannot store shape {arr.shape} (at most 255 "
                           f"dims, each below 2**32)")
    payload = (bytes([0, 0, code, arr.ndim]) + np.asarray(arr.shape, ">u4").tobytes()
               + np.ascontiguousarray(arr, IDX_DTYPES[code]).tobytes())
    target = os.fspath(path)

    def write(f: IO[bytes]) -> None:
        if target.endswith(".gz"):
            with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:  # mtime=0: reproducible
                gz.write(payload)
        else:
            f.write(payload)

    write_atomically(target, write)


# --- MNIST --------------------------------------------------------------------------------------

_MNIST_FILES = {  # role -> accepted base names; each may also end with .gz
    "training images": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "training labels": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "test images": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "test labels": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}


def _find(directory: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        for candidate in (name, name + ".gz"):
            path = os.path.join(directory, candidate)
            if os.path.isfile(path):
                return path
    return None


def _images(path: str) -> np.ndarray:
    images = read_idx(path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DatasetError(f"{path}: expected uint8 images of shape [n, rows, cols], got "
                           f"{images.dtype} of shape {images.shape}")
    x = images.reshape(images.shape[0], -1).astype(np.float32)
    x /= np.float32(255.0)
    return x


def _labels(path: str, n_images: int, images_path: str) -> np.ndarray:
    labels = read_idx(path)
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise DatasetError(f"{path}: expected integer labels of shape [n], got {labels.dtype} "
                           f"of shape {labels.shape}")
    if labels.shape[0] != n_images:
        raise DatasetError(f"{path}: {labels.shape[0]} labels, but {images_path} holds "
                           f"{n_images} images")
    return labels.astype(np.int64)


def load_mnist(directory: PathLike) -> Split:
    """Load MNIST (or Fashion-MNIST, same file names) from the four IDX files in ``directory``.

    The files are looked up by their standard names, ``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``
    (also the ``train-images.idx3-ubyte`` spelling), each plain or with ``.gz``. Nothing is
    downloaded.

    Args:
        directory: the folder holding the files.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: images as float32 in [0, 1] flattened to
        ``[n, rows * cols]`` (``[n, 784]`` for MNIST), labels as int64 ``[n]``.

    Raises:
        DatasetError: a file is missing (all missing ones are listed with the names tried),
            malformed, or images and labels disagree in count.

    Example (with the files in ``~/data/mnist``)::

        x_train, y_train, x_test, y_test = load_mnist("~/data/mnist")
        x_train.shape, y_train[:3]   # ((60000, 784), array([5, 0, 4]))
    """
    folder = os.path.expanduser(os.fspath(directory))
    if not os.path.isdir(folder):
        raise DatasetError(f"{folder}: not a directory; load_mnist needs the folder holding the "
                           f"four MNIST IDX files")
    found = {role: _find(folder, names) for role, names in _MNIST_FILES.items()}
    missing = [f"{role} ({' or '.join(n + '[.gz]' for n in _MNIST_FILES[role])})"
               for role, path in found.items() if path is None]
    if missing:
        raise DatasetError(f"{folder}: MNIST files missing: " + "; ".join(missing))
    x_train = _images(found["training images"])
    y_train = _labels(found["training labels"], len(x_train), found["training images"])
    x_test = _images(found["test images"])
    y_test = _labels(found["test labels"], len(x_test), found["test images"])
    if x_train.shape[1] != x_test.shape[1]:
        raise DatasetError(f"{folder}: training images have {x_train.shape[1]} pixels, test "
                           f"images {x_test.shape[1]}")
    return x_train, y_train, x_test, y_test


# --- scikit-learn's 8x8 digits ------------------------------------------------------------------

def load_digits(test_fraction: float = 0.2, seed: int = 0) -> Split:
    """The 8x8 handwritten digits (1797 images, 10 classes) shipped with scikit-learn, split.

    The split is stratified: each class contributes ``round(test_fraction * its count)`` images
    to the test set, chosen by a ``numpy`` generator seeded with ``seed``; both sets are then
    shuffled. The same seed always gives the same split.

    Args:
        test_fraction: the share of each class held out for testing, in [0, 1).
        seed: seeds the split and the shuffle.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: pixels as float32 in [0, 1] (the raw 0..16
        values divided by 16) of shape ``[n, 64]``, labels as int64 ``[n]``.

    Raises:
        DatasetError: scikit-learn is not installed (``pip install scikit-learn``), or
            ``test_fraction`` is out of range.

    >>> x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)  # doctest: +SKIP
    >>> x_train.shape, x_test.shape                                               # doctest: +SKIP
    ((1438, 64), (359, 64))
    """
    if not 0.0 <= test_fraction < 1.0:
        raise DatasetError(f"load_digits: test_fraction must be in [0, 1), got {test_fraction!r}")
    try:
        from sklearn.datasets import load_digits as _sklearn_digits
    except ImportError as e:
        raise DatasetError("load_digits needs scikit-learn, which ships the digits data: "
                           "pip install scikit-learn") from e
    bunch = _sklearn_digits()
    x = np.asarray(bunch.data, np.float32) / np.float32(16.0)
    y = np.asarray(bunch.target, np.int64)
    rng = np.random.default_rng(seed)
    test_idx = []
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        test_idx.append(members[:int(round(test_fraction * len(members)))])
    is_test = np.zeros(len(y), bool)
    is_test[np.concatenate(test_idx)] = True
    train = rng.permutation(np.flatnonzero(~is_test))
    test = rng.permutation(np.flatnonzero(is_test))
    return x[train], y[train], x[test], y[test]
