"""Storage types (bfloat16, float8, float4, int4/int2 from ml_dtypes): held by arrays,
placeholders and constants, converted by ``cast``, saved and loaded bit for bit, refused by
name by every other graph op -- interpreted and compiled alike."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import compiler
from samediff.errors import NdDTypeError

ml_dtypes = pytest.importorskip("ml_dtypes")


def test_storage_types_are_held_and_cast():
    b = nd.create([1.0, 2.5, 1e3], dtype="bfloat16")
    assert b.dtype == ml_dtypes.bfloat16
    assert b.castTo("float32").numpy().tolist() == [1.0, 2.5, 1000.0]
    f8 = nd.create([1.0, 500.0], dtype="float32").castTo("float8_e4m3fn")
    # numpy's conversion: 500 is beyond float8_e4m3fn's 448, which has no infinity
    assert f8.dtype == ml_dtypes.float8_e4m3fn and np.isnan(f8.numpy()[1].astype(np.float32))
    assert nd.create([7, -8], dtype="int8").castTo("int4").dtype == ml_dtypes.int4


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
def test_graph_ops_refuse_storage_types_and_casts_carry_them(executor):
    previous = compiler.set_executor(executor)
    try:
        sd = nd.SameDiff.create()
        p = sd.placeholder("p", nd.BFLOAT16, 3)
        with pytest.raises(NdDTypeError, match=r"add: bfloat16 is a storage type.*cast to float32"):
            p + 1.0
        y = (p.castTo("float32") * 2.0).castTo("bfloat16")  # widen, compute, round back
        out = sd.output({"p": nd.create([1.0, 2.5, 1e3], dtype="bfloat16")}, y.name)[y.name]
        assert out.dtype == ml_dtypes.bfloat16
        assert out.numpy().astype(float).tolist() == [2.0, 5.0, 2000.0]
    finally:
        compiler.set_executor(previous)


def test_storage_constants_save_and_load_bit_for_bit(tmp_path):
    sd = nd.SameDiff.create()
    values = {"bf": np.array([1.5, -2.0, 3e38], ml_dtypes.bfloat16),
              "f8": np.array([0.5, -448.0, np.nan], ml_dtypes.float8_e4m3fn),
              "i4": np.array([-8, 7, 0], ml_dtypes.int4)}
    for name, v in values.items():
        sd.constant(name, v)
    p = sd.placeholder("p", "float8_e5m2", 2)
    y = p.castTo("float32")
    sd.save(tmp_path / "m.sdz")
    back = nd.SameDiff.load(tmp_path / "m.sdz")
    for name, v in values.items():
        got = back.getVariable(name).getArr().numpy()
        assert got.dtype == v.dtype and got.tobytes() == v.tobytes()
    feed = np.array([1.0, -3.0], ml_dtypes.float8_e5m2)
    assert back.output({"p": feed}, y.name)[y.name].numpy().tolist() == [1.0, -3.0]


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_onnx_cast_to_float8_e8m0_matches_the_reference_bit_for_bit(mode, saturate):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from samediff.onnx.backend import run
    x = np.array([0, 1, 1.5, 3, 0.75, -2.5, 1e-40, 3e38, np.inf, -np.inf, np.nan, 2.0 ** 127,
                  1.5 * 2.0 ** 127, 1.0000001, 0.9999999, 6e-39, 1.5 * 2.0 ** -126], np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, saturate=saturate,
                            round_mode=mode)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(x)])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E8M0, [len(x)])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = run(model, [x])[0]
    assert onnx is not None and got.dtype == want.dtype
    assert got.view(np.uint8).tolist() == want.view(np.uint8).tolist()
