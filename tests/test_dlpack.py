"""DLPack both ways (zero-copy, complex included); bfloat16 is a storage type DLPack cannot carry.

numpy is the reference consumer/producer; JAX and PyTorch tests run where they are installed
(``pytest.importorskip``): neither is a dependency of nd4py.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.dtypes import SUPPORTED

DTYPES = sorted(SUPPORTED, key=str)


def _values(dtype: np.dtype, shape=(2, 3)) -> np.ndarray:
    return (np.arange(int(np.prod(shape))) % 2 if dtype.kind == "b" else
            np.arange(int(np.prod(shape)))).astype(dtype).reshape(shape)


def _aligned(values: np.ndarray, align: int = 64) -> np.ndarray:
    """A copy of ``values`` in a buffer aligned to ``align`` bytes (XLA aliases only those)."""
    raw = np.empty(values.nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


# -- numpy both ways -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_with_numpy_shares_memory(dtype):
    a = _values(dtype)
    x = nd.from_dlpack(a)
    assert isinstance(x, nd.NDArray) and x.dtype == dtype and x.shape == a.shape
    assert np.shares_memory(x.numpy(), a)
    back = np.from_dlpack(x)
    assert np.shares_memory(back, a) and back.dtype == dtype
    np.testing.assert_array_equal(back, a)


def test_writes_are_visible_both_ways():
    a = np.zeros((2, 3), np.float32)
    x = nd.from_dlpack(a)
    a[0, 1] = 5.0
    assert x.get_double(0, 1) == 5.0
    x.put_scalar(1, 2, 7.0)
    assert a[1, 2] == 7.0
    b = np.from_dlpack(x)
    b[0, 0] = 3.0
    assert x.get_double(0, 0) == 3.0 and a[0, 0] == 3.0
    x.addi(1)
    assert b[0, 0] == 4.0


def test_protocol_signature_and_device():
    x = nd.create([1.0, 2.0])
    assert x.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    assert type(x.__dlpack__()).__name__ == "PyCapsule"
    assert type(x.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0),
                             copy=False)).__name__ == "PyCapsule"
    copied = np.from_dlpack(x, copy=True)
    assert not np.shares_memory(copied, x.numpy())
    assert not np.shares_memory(nd.from_dlpack(x, copy=True).numpy(), x.numpy())
    assert np.shares_memory(nd.from_dlpack(x, device="cpu").numpy(), x.numpy())


def test_read_only_arrays_stay_read_only():
    a = np.arange(4.0)
    a.flags.writeable = False
    x = nd.from_dlpack(a)
    assert np.shares_memory(x.numpy(), a) and not x.numpy().flags.writeable
    back = np.from_dlpack(x)  # DLPack >= 1.0 carries the read-only flag
    assert np.shares_memory(back, a) and not back.flags.writeable
    with pytest.raises(ValueError):
        x.put_scalar(0, 1.0)


def test_non_contiguous_views():
    base = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    view = base[::2, 1:4]
    x = nd.from_dlpack(view)
    assert np.shares_memory(x.numpy(), base) and x.numpy().strides == view.strides
    np.testing.assert_array_equal(x.numpy(), view)
    tx = nd.create(base).T  # a transposed NDArray exports its strides
    back = np.from_dlpack(tx)
    assert np.shares_memory(back, base)
    np.testing.assert_array_equal(back, base.T)


def test_zero_d():
    a = np.array(3.5, np.float64)
    x = nd.from_dlpack(a)
    assert x.shape == () and x.item() == 3.5 and np.shares_memory(x.numpy(), a)
    back = np.from_dlpack(nd.scalar(2.0))
    assert back.shape == () and back == 2.0


def test_a_traced_array_cannot_be_exported():
    with nd.graph_scope():
        lazy = nd.ones(3) + 1
        with pytest.raises(nd.TracingError):
            np.from_dlpack(lazy)
        with pytest.raises(nd.TracingError):
            nd.from_dlpack(lazy)
        with pytest.raises(nd.TracingError):
            lazy.__dlpack__()


def test_objects_without_dlpack_are_refused():
    with pytest.raises((TypeError, AttributeError)):
        nd.from_dlpack([1.0, 2.0])


# -- complex crosses too; bfloat16 does not -----------------------------------------------------
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_round_trips_without_copying(dtype):
    z = np.array([1 + 2j, -3j, 0.5], dtype)
    x = nd.from_dlpack(z)
    assert x.dtype == dtype and np.shares_memory(x.numpy(), z)
    back = np.from_dlpack(x)
    assert back.dtype == dtype and np.shares_memory(back, z)
    assert nd.to_dtype(np.dtype(dtype).name) == dtype
    assert nd.SameDiff.create().placeholder("z", dtype, -1).dtype == dtype


@pytest.mark.parametrize("name", ["bfloat16", "BFLOAT16", "BFloat16"])
def test_bfloat16_is_a_storage_type_by_name(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert nd.to_dtype(name) == np.dtype(ml_dtypes.bfloat16)
    assert nd.zeros(2, dtype=name).dtype == ml_dtypes.bfloat16
    assert nd.SameDiff.create().placeholder("b", name, 2).dtype == ml_dtypes.bfloat16


@pytest.mark.parametrize("name", ["BFLOAT16", "bfloat16"])
def test_dtype_constants_of_storage_types(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert getattr(nd, name) == getattr(nd.DataType, name.upper()) == ml_dtypes.bfloat16


def test_bfloat16_from_ml_dtypes_is_held_but_dlpack_cannot_carry_it():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.ones(3, ml_dtypes.bfloat16)
    assert nd.create(a).dtype == ml_dtypes.bfloat16
    with pytest.raises(nd.NdDTypeError, match="bfloat16 is a storage type.*cast it to FLOAT"):
        nd.from_dlpack(a)


def test_unknown_dtype_lists_the_supported_ones():
    with pytest.raises(nd.NdDTypeError, match=r"unknown data type 'flaot'.*supported: BOOL"):
        nd.to_dtype("flaot")


# -- JAX (optional) --------------------------------------------------------------------------------
@pytest.fixture
def jnp():
    pytest.importorskip("jax")
    import jax.numpy
    return jax.numpy


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d.itemsize < 8], ids=str)
def test_jax_to_nd_is_zero_copy(jnp, dtype):
    j = jnp.asarray(_values(dtype))
    x = nd.from_dlpack(j)
    assert x.dtype == dtype
    assert x.numpy().ctypes.data == j.unsafe_buffer_pointer()
    assert not x.numpy().flags.writeable  # JAX arrays are immutable
    np.testing.assert_array_equal(x.numpy(), np.asarray(j))


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d.itemsize < 8], ids=str)
def test_nd_to_jax_aliases_an_aligned_buffer(jnp, dtype):
    import jax
    x = nd.from_dlpack(_aligned(_values(dtype)))
    for j in (jnp.from_dlpack(x), jax.dlpack.from_dlpack(x)):
        assert j.dtype == dtype and j.shape == x.shape
        assert j.unsafe_buffer_pointer() == x.numpy().ctypes.data
        np.testing.assert_array_equal(np.asarray(j), x.numpy())


def test_jax_64_bit_round_trip(jnp):
    import jax
    with jax.enable_x64(True):
        x = nd.from_dlpack(_aligned(np.arange(6, dtype=np.float64)))
        j = jnp.from_dlpack(x)
        assert j.dtype == np.float64 and j.unsafe_buffer_pointer() == x.numpy().ctypes.data
        back = nd.from_dlpack(j)
        assert back.dtype == np.float64 and np.shares_memory(back.numpy(), x.numpy())


def test_jax_bfloat16_is_named_and_complex_crosses(jnp):
    with pytest.raises(nd.NdDTypeError, match="bfloat16 is not supported"):
        nd.from_dlpack(jnp.ones(3, jnp.bfloat16))
    z = nd.from_dlpack(jnp.asarray(np.array([1 + 2j, 3j], np.complex64)))
    assert z.dtype == np.complex64 and z.numpy().tolist() == [1 + 2j, 3j]


# -- PyTorch (optional) ----------------------------------------------------------------------------
@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_torch_both_ways_write_through(torch):
    x = nd.create(np.zeros((2, 3), np.float32))
    t = torch.from_dlpack(x)
    t[0, 1] = 5.0
    assert x.get_double(0, 1) == 5.0
    tt = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    y = nd.from_dlpack(tt)
    y.put_scalar(1, 1, -1.0)
    assert tt[1, 1].item() == -1.0 and y.dtype == np.float64
    v = nd.from_dlpack(tt.t())  # a non-contiguous tensor keeps its strides
    assert v.shape == (3, 2) and v.get_double(1, 1) == -1.0


def test_torch_bfloat16_is_named_and_complex_crosses(torch):
    with pytest.raises(nd.NdDTypeError, match="bfloat16"):
        nd.from_dlpack(torch.ones(3, dtype=torch.bfloat16))
    z = torch.tensor([1 + 2j, 3j], dtype=torch.complex64)
    x = nd.from_dlpack(z)
    assert x.dtype == np.complex64 and x.numpy().tolist() == [1 + 2j, 3j]
    x.put_scalar(0, 5.0)  # zero-copy: the tensor sees the write
    assert z[0].item() == 5 + 0j
