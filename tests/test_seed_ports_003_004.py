"""Literal ports of every Java sample / API call in seeds 003-004 (seed 003 is seed 004's page
with its code stripped) not already ported by tests/test_nd4j_ports.py. Each ``# T<n>`` comment marks one trial (a statement or small snippet a
user would port); the seed file and line is given next to it. Values are checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.training import Adam, TrainingConfig

RNG = np.random.default_rng(1234)


# ================================================================================================
# Seeds 003 / 004: variables (003 is the same page as 004 with its code stripped)
# ================================================================================================

def test_seed_004_variable_types_of_op_outputs():
    samediff = nd.SameDiff.create()
    a = samediff.var("a", nd.DataType.FLOAT, 2)
    yourVariable = a.add(1.0)
    varType = yourVariable.getVariableType()  # T83 004:213
    assert varType == nd.VariableType.ARRAY  # "Results (outputs) of all operations are of ARRAY"
    dataType = yourVariable.dataType()  # T84 004:223
    assert dataType == nd.DataType.FLOAT


def test_seed_004_getarr_of_an_uncomputed_array():
    samediff = nd.SameDiff.create()                                           # T85 004:215
    x = samediff.placeHolder("x", nd.DataType.FLOAT, 2)
    y = x.mul(2.0)
    assert y.getArr() is None
    with pytest.raises(nd.NdError):
        y.getArr(True)


def test_seed_004_unsigned_data_types_exist():
    # 004:219 "unsigned integer types (UINT16, UINT32 and UINT64) will be available in beta5"
    assert (nd.DataType.UINT16, nd.DataType.UINT32, nd.DataType.UINT64) == (  # T86
        np.uint16, np.uint32, np.uint64)


def test_seed_004_conv1d_needs_floating_point():
    samediff = nd.SameDiff.create()                                           # T87 004:227
    input = samediff.placeHolder("input", nd.DataType.FLOAT, 1, 2, 5)
    weights = samediff.var("weights", nd.DataType.FLOAT, 3, 2, 4)             # [k, nIn, nOut]
    config = nd.Conv1DConfig.builder().k(3).s(1).build()
    prod = samediff.cnn.conv1d(input, weights, config)
    assert prod.shape[-1] == 3
    ints = samediff.placeHolder("ints", nd.DataType.INT, 1, 2, 5)             # T88 004:229
    with pytest.raises(nd.NdError):
        samediff.cnn.conv1d(ints, weights, config)


def test_seed_004_names_are_created_unique():
    samediff = nd.SameDiff.create()                                           # T89 004:243
    a = samediff.var("a", nd.DataType.FLOAT, 2)
    s1, s2 = a.add(1.0), a.add(2.0)
    assert s1.name != s2.name and s1.name in samediff.variableNames()
    with pytest.raises(nd.NdError):
        samediff.var("a", nd.DataType.FLOAT, 3)
    b = samediff.var("b", nd.DataType.FLOAT, 2)
    with pytest.raises(nd.NdError):                                           # T90 004:379
        b.setVarName("a")
    assert b.getVarName() == "b"


def test_seed_004_var_creation_forms():
    samediff = nd.SameDiff.create()
    weights = samediff.var("weights", nd.DataType.FLOAT, 784, 10)             # T91 004:256
    assert weights.getArr().shape == (784, 10) and not weights.getArr().numpy().any()
    arr = nd.nrand(784, 10).div(28)
    weigths = samediff.var("weigths", arr)                                    # T92 004:262
    np.testing.assert_array_equal(weigths.getArr().numpy(), arr.numpy())
    assert weigths.getVariableType() == nd.VariableType.VARIABLE
    assert weigths.dataType() == nd.DataType.FLOAT


def test_seed_004_constants_and_scalars():
    samediff = nd.SameDiff.create()
    constant = samediff.constant("constants", nd.create([3.1415, 42.0]))      # T93 004:279
    assert constant.getVariableType() == nd.VariableType.CONSTANT
    assert constant.dataType() == nd.DataType.FLOAT
    np.testing.assert_allclose(constant.eval().numpy(), np.array([3.1415, 42.0], np.float32))
    ints = samediff.constant("ints", nd.create(np.array([1, 2], np.int32)))  # T94 004:275
    bools = samediff.constant("bools", nd.create(np.array([True, False])))
    assert ints.dataType() == nd.DataType.INT and bools.dataType() == nd.DataType.BOOL
    someScalar = samediff.scalar("scalar", 42)  # T95 004:283
    assert someScalar.getVariableType() == nd.VariableType.CONSTANT
    assert someScalar.eval().numpy().shape == () and someScalar.eval().item() == 42
    assert np.dtype(someScalar.dataType()).kind == "i"


def test_seed_004_array_variables_have_gradients():
    samediff = nd.SameDiff.create()                                           # T96 004:293
    x = samediff.placeHolder("x", nd.DataType.FLOAT, 3)
    w = samediff.var("w", nd.create([1.0, 2.0, 3.0]))
    h = x.mul("h", w)
    h.mul(h).sum("loss").markAsLoss()
    xv = np.array([1.0, 1.0, 2.0], np.float32)
    g = samediff.calculateGradients({"x": xv}, "h", "w")
    hv = xv * np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(g["h"].numpy(), 2 * hv)
    np.testing.assert_allclose(g["w"].numpy(), 2 * hv * xv)


def _regression(samediff):
    input = samediff.placeHolder("input", nd.DataType.FLOAT, -1, 3)
    labels = samediff.placeHolder("labels", nd.DataType.FLOAT, -1, 1)
    weights = samediff.var("weights", nd.DataType.FLOAT, 3, 1)
    bias = samediff.var("bias", nd.DataType.FLOAT, 1)
    input.mmul(weights).add(bias).squaredDifference(labels).mean("loss").markAsLoss()
    samediff.setTrainingConfig(TrainingConfig.builder().updater(Adam(0.05))
                               .dataSetFeatureMapping("input").dataSetLabelMapping("labels")
                               .build())
    return weights, bias


def test_seed_004_variable_to_constant_is_not_trained_and_back():
    samediff = nd.SameDiff.create()
    someVariable, bias = _regression(samediff)
    xs = RNG.random((32, 3), dtype=np.float32)
    ys = xs @ np.array([[1.0], [2.0], [3.0]], np.float32)
    samediff.convertToConstant(someVariable)                                  # T97 004:345
    assert someVariable.getVariableType() == nd.VariableType.CONSTANT
    samediff.fit([(xs, ys)], 5)
    assert not someVariable.getArr().numpy().any()                            # not trained
    assert bias.getArr().numpy().any()                                        # bias was
    frozenWeights = someVariable
    samediff.convertToVariable(frozenWeights)  # not frozen any more             T98 004:354
    samediff.fit([(xs, ys)], 5)
    assert frozenWeights.getArr().numpy().any()


def test_seed_004_named_intermediate_and_get_variable():
    samediff = nd.SameDiff.create()
    input = samediff.placeHolder("input", nd.DataType.FLOAT, 3, -1)
    labels = samediff.placeHolder("labels", nd.DataType.FLOAT, 2, -1)
    weights = samediff.var("weights", nd.create(RNG.random((2, 3), dtype=np.float32)))
    bias = samediff.var("bias", nd.create(RNG.random((2, 1), dtype=np.float32)))
    regressionCost = weights.mmul(input).sub("regression_prediction", bias) \
        .squaredDifference(labels)  # T99 004:371
    errorVector = samediff.getVariable("regression_prediction").sub(labels)  # T100
    xv, yv = RNG.random((3, 4), dtype=np.float32), RNG.random((2, 4), dtype=np.float32)
    pred = weights.getArr().numpy() @ xv - bias.getArr().numpy()
    out = samediff.output({"input": xv, "labels": yv}, regressionCost.name, errorVector.name)
    np.testing.assert_allclose(out[regressionCost.name].numpy(), (pred - yv) ** 2, rtol=1e-5)
    np.testing.assert_allclose(out[errorVector.name].numpy(), pred - yv, rtol=1e-5, atol=1e-6)
    # T101 004:375 -- the seed's own spelling "regressionPrediction" names no variable
    with pytest.raises((nd.NdError, AttributeError)):
        samediff.getVariable("regressionPrediction").sub(labels)


def test_seed_004_eval_of_values():
    samediff = nd.SameDiff.create()                                           # T102 004:383
    w = samediff.var("w", nd.create([1.0, 2.0]))
    np.testing.assert_allclose(w.eval().numpy(), [1.0, 2.0])
    x = samediff.placeHolder("x", nd.DataType.FLOAT, 2)
    with pytest.raises(nd.PlaceholderError):                                  # "should first be set"
        x.add(w).eval()


def test_seed_004_eval_after_setting_a_placeholder():
    samediff = nd.SameDiff.create()                                           # T103 004:383
    w = samediff.var("w", nd.create([1.0, 2.0]))
    x = samediff.placeHolder("x", nd.DataType.FLOAT, 2)
    x.setArray(nd.create([10.0, 20.0]))
    np.testing.assert_allclose(x.add(w).eval().numpy(), [11.0, 22.0])


def test_seed_004_constants_have_no_gradient():
    samediff = nd.SameDiff.create()                                           # T104 004:160
    c = samediff.constant("c", nd.create([1.0, 2.0]))
    w = samediff.var("w", nd.create([3.0, 4.0]))
    c.mul(w).sum("loss").markAsLoss()
    np.testing.assert_allclose(w.getGradient().eval().numpy(), [1.0, 2.0])
    with pytest.raises(nd.NdError):
        c.getGradient()


def test_seed_004_persistence_of_variable_types(tmp_path):
    samediff = nd.SameDiff.create()                                           # T105 004:152-177
    samediff.var("v", nd.create([1.0, 2.0]))
    samediff.constant("c", nd.create([3.0]))
    ph = samediff.placeHolder("p", nd.DataType.FLOAT, 2)
    ph.setArray(nd.create([5.0, 6.0]))
    samediff.save(tmp_path / "m.sdz", False)
    loaded = nd.SameDiff.load(tmp_path / "m.sdz", False)
    assert loaded.getVariable("v").getArr().numpy().tolist() == [1.0, 2.0]
    assert loaded.getVariable("c").getArr().numpy().tolist() == [3.0]
    assert loaded.getVariable("p").getArr() is None                          # not persistent


def test_seed_004_variable_type_enum_has_four_members():
    assert [t.name for t in nd.VariableType] == [                              # T106 004:189
        "VARIABLE", "CONSTANT", "PLACEHOLDER", "ARRAY"]


def test_seed_004_variable_knows_its_samediff():
    samediff = nd.SameDiff.create()                                           # T107 004:235
    v = samediff.var("v", nd.DataType.FLOAT, 2)
    assert v.getSameDiff() is samediff and v.sameDiff is samediff


def test_seed_004_constants_may_be_changed_externally():
    samediff = nd.SameDiff.create()                                           # T108 004:195
    c = samediff.constant("c", nd.create([1.0, 2.0]))
    y = c.mul(2.0)
    np.testing.assert_allclose(y.eval().numpy(), [2.0, 4.0])
    c.setArray(nd.create([5.0, 6.0]))
    np.testing.assert_allclose(y.eval().numpy(), [10.0, 12.0])


def test_seed_004_float_variables_of_each_floating_type():
    samediff = nd.SameDiff.create()                                           # T109 004:219/252
    h = samediff.var("h", nd.DataType.HALF, 2)
    d = samediff.var("d", nd.DataType.DOUBLE, 2)
    assert h.dataType() == nd.DataType.HALF and d.dataType() == nd.DataType.DOUBLE
    assert h.getArr().numpy().dtype == np.float16 and d.getArr().numpy().dtype == np.float64


def test_seed_004_placeholders_of_any_data_type():
    samediff = nd.SameDiff.create()                                           # T110 004:286
    ids = samediff.placeHolder("ids", nd.DataType.INT, -1)
    flags = samediff.placeHolder("flags", nd.DataType.BOOL, -1)
    out = ids.add(1)
    picked = flags.logical_not()
    got = samediff.output({"ids": np.array([1, 2], np.int32),
                           "flags": np.array([True, False])}, out.name, picked.name)
    assert got[out.name].numpy().tolist() == [2, 3] and got[out.name].numpy().dtype == np.int32
    assert got[picked.name].numpy().tolist() == [False, True]
    assert flags.dataType() == nd.DataType.BOOL
