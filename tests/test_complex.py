"""complex64/complex128: eager ops against a per-element ``cmath`` reference, traced and
compiled (library steps: fused kernels are real-valued) against eager, promotion (a Python
complex is weak), save/load, DLPack, and gradients refused with a named error."""
from __future__ import annotations

import cmath

import numpy as np
import pytest

import nd4py as nd

Z = np.array([[1 + 2j, -0.5 + 0.25j, 3 - 1j], [0.75j, -2 - 2j, 0.5 + 0j]])

#: op -> per-element reference written with cmath / Python complex arithmetic
UNARY = {
    "exp": cmath.exp, "log": cmath.log, "sqrt": cmath.sqrt, "sin": cmath.sin,
    "cos": cmath.cos, "tan": cmath.tan, "sinh": cmath.sinh, "cosh": cmath.cosh,
    "tanh": cmath.tanh, "asin": cmath.asin, "acos": cmath.acos, "atan": cmath.atan,
    "asinh": cmath.asinh, "acosh": cmath.acosh, "atanh": cmath.atanh,
    "neg": lambda z: -z, "square": lambda z: z * z, "reciprocal": lambda z: 1 / z,
    "conj": lambda z: z.conjugate(), "real": lambda z: z.real, "imag": lambda z: z.imag,
    "abs": abs, "angle": cmath.phase, "expm1": lambda z: cmath.exp(z) - 1,
    "log1p": lambda z: cmath.log(1 + z),
}
BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b, "pow": lambda a, b: a ** b}


def reference(f, *arrays):
    arrays = np.broadcast_arrays(*arrays)
    out = [f(*(complex(a[i]) for a in arrays)) for i in np.ndindex(arrays[0].shape)]
    return np.array(out).reshape(arrays[0].shape)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops_match_cmath(name, dtype):
    z = Z.astype(dtype)
    got = getattr(nd, name)(nd.create(z))
    want = reference(UNARY[name], z)
    real_result = name in ("real", "imag", "abs", "angle")
    expected_dtype = np.finfo(dtype).dtype if real_result else np.dtype(dtype)
    assert got.dtype == expected_dtype
    tol = 1e-5 if dtype == np.complex64 else 1e-12
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_match_python_complex(name):
    w = np.array([0.5 - 1j, 2 + 0.5j, -1.5j])
    got = getattr(nd, name)(nd.create(Z), nd.create(w))
    np.testing.assert_allclose(got.numpy(), reference(BINARY[name], Z, w), rtol=1e-12)


def test_reductions_and_matmul():
    z = nd.create(Z)
    np.testing.assert_allclose(z.sum(1).numpy(), [sum(map(complex, row)) for row in Z])
    np.testing.assert_allclose(z.mean().numpy(), sum(map(complex, Z.ravel())) / Z.size)
    m = Z @ Z.conj().T
    want = [[sum(complex(a) * complex(b).conjugate() for a, b in zip(r, s)) for s in Z]
            for r in Z]
    np.testing.assert_allclose(m, want)
    np.testing.assert_allclose((z @ z.conj().T).numpy(), want)


def test_promotion_python_complex_is_weak():
    f32, f64 = nd.create(np.ones(2, np.float32)), nd.create(np.ones(2, np.float64))
    assert (f32 * 1j).dtype == np.complex64
    assert (f64 * 1j).dtype == np.complex128
    assert (f32 + nd.create(np.ones(2, np.complex64))).dtype == np.complex64
    assert (f64 + nd.create(np.ones(2, np.complex64))).dtype == np.complex128
    assert (nd.create(np.ones(2, np.int32)) * (1 + 1j)).dtype == np.complex128
    assert nd.create([1 + 1j]).dtype == np.complex128 and nd.zeros(2, dtype=nd.COMPLEX64).dtype \
        == np.complex64


def _program(a, b):
    return nd.exp(a * 1j) * b + a.conj() - (b.abs() * 2.0)


def test_traced_and_compiled_match_eager():
    a = nd.create(Z.astype(np.complex64))
    b = nd.create(np.linspace(-1, 1, 3).astype(np.float32))
    want = _program(a, b).numpy()
    with nd.graph_scope():
        lazy = _program(a, b)
    np.testing.assert_allclose(lazy.numpy(), want, rtol=1e-6)
    compiled = nd.compile(_program)
    got = compiled(a, b)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


@pytest.mark.compiled
def test_compiled_plan_runs_complex_steps_through_numpy():
    a = nd.create(np.tile(Z, (50, 10)))
    compiled = nd.compile(lambda x: nd.sqrt(x * x + 1.0).sum(1))
    np.testing.assert_allclose(compiled(a).numpy(),
                               np.sqrt(a.numpy() ** 2 + 1.0).sum(1), rtol=1e-12)
    assert "0 fused kernel" in compiled.explain()


def test_samediff_placeholders_constants_and_save_load(tmp_path):
    sd = nd.SameDiff.create()
    z = sd.placeHolder("z", nd.COMPLEX128, -1, 3)
    c = sd.constant("c", np.array([1j, 2.0, -1 + 0j]))
    out = (z * c + 1j).rename("out")
    feed = {"z": Z}
    want = Z * np.array([1j, 2.0, -1]) + 1j
    np.testing.assert_allclose(sd.output(feed, "out")["out"].numpy(), want)
    assert out.dtype == np.complex128 and out.real.dtype == np.float64
    sd.save(tmp_path / "complex.sdnb")
    again = nd.SameDiff.load(tmp_path / "complex.sdnb")
    np.testing.assert_array_equal(again.output(feed, "out")["out"].numpy(), want)


def test_gradients_through_complex_values_are_refused_by_name():
    sd = nd.SameDiff.create()
    w = sd.var("w", np.array([1.0, 2.0]))
    ((w.cast(nd.COMPLEX128) * 1j).abs().sum()).markAsLoss()
    with pytest.raises(nd.GradientError, match="complex values.*real-valued"):
        sd.calculateGradients({}, "w")
    with pytest.raises(nd.GradientError, match="complex"):
        nd.grad(lambda x: (x * x).abs().sum())(nd.create(Z))
    # a real function of real variables whose complex detour is outside the path is fine
    sd2 = nd.SameDiff.create()
    v = sd2.var("v", np.array([1.0, 2.0]))
    phase = sd2.constant("p", np.array([1j, -1j])).abs()  # real, constant
    (v * phase).sum().markAsLoss()
    np.testing.assert_allclose(sd2.calculateGradients({}, "v")["v"].numpy(), [1.0, 1.0])


def test_numpy_functions_return_ndarrays_for_complex():
    z = nd.create(Z)
    for got, want in [(np.exp(z), np.exp(Z)), (np.conj(z), np.conj(Z)), (np.real(z), Z.real),
                      (np.imag(z), Z.imag), (np.angle(z), np.angle(Z)), (np.abs(z), np.abs(Z))]:
        assert isinstance(got, nd.NDArray)
        np.testing.assert_allclose(got.numpy(), want)
    assert (z.real.numpy() == Z.real).all() and (z.imag.numpy() == Z.imag).all()
