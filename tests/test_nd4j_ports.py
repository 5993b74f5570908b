"""Literal ports of the seeds' ND4J code (seed 000's MNIST walkthrough, seed 001's graph
inspection): the same method names, argument orders and overloads as the Java."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import GraphError, TrainingError
from samediff.init import (ConstantInitScheme, IdentityInitScheme, LecunUniformInitScheme,
                           OneInitScheme, ReluInitScheme, UniformInitScheme, WeightInit,
                           XavierInitScheme, ZeroInitScheme)
from samediff.training import Adam, TrainingConfig


def seed_000_topology() -> nd.SameDiff:
    """Seed 000, line by line (its typos in names kept: ``lables``)."""
    samediff = nd.SameDiff.create()
    input = samediff.placeHolder("input", nd.FLOAT, -1, 784)  # noqa: A001 - the seed's name
    weights_1 = samediff.var(XavierInitScheme('c', 784, 100), nd.FLOAT, 784, 100)
    bias_1 = samediff.var(XavierInitScheme('c', 100), nd.FLOAT, 100)
    out_1 = samediff.nn.relu(input.mmul(weights_1).add(bias_1))
    weights_2 = samediff.var(XavierInitScheme('c', 100, 10), nd.FLOAT, 100, 10)
    bias_2 = samediff.var(XavierInitScheme('c', 10), nd.FLOAT, 10)
    samediff.nn.softmax("output", out_1.mmul(weights_2).add(bias_2))
    samediff.placeHolder("lables", 10)
    return samediff


def test_seed_000_topology_and_config_port_literally(tmp_path):
    samediff = seed_000_topology()
    assert samediff.getShapeForVarName("output") == (-1, 10)
    assert samediff.get_variable("lables").shape == (10,)
    assert samediff.get_variable("lables").dtype == np.float32  # FLOAT when left out
    names = samediff.variableNames()
    assert names[:3] == ["input", "var", "var_1"]  # unnamed variables get fresh names
    config = (TrainingConfig.Builder()
              .l2(1e-4)
              .updater(Adam(1e-3))
              .dataSetFeatureMapping("input")
              .dataSetLabelsMapping("lables")
              .build())
    samediff.setTrainingConfig(config)
    assert samediff.training_config.feature_mapping == ["input"]
    assert samediff.training_config.label_mapping == ["lables"]

    model_file_name = str(tmp_path / "sameDiffModel.fd")
    samediff.asFlatFile(model_file_name)
    from_file = nd.SameDiff.fromFlatFile(model_file_name)
    feed = {"input": np.random.default_rng(0).random((3, 784), dtype=np.float32)}
    np.testing.assert_array_equal(from_file.output(feed, "output")["output"].numpy(),
                                  samediff.output(feed, "output")["output"].numpy())
    assert from_file.training_config == config


def test_load_and_save_take_nd4js_updater_state_flag(tmp_path):
    sd = nd.SameDiff.create()
    x = sd.placeHolder("x", nd.FLOAT, -1, 2)
    w = sd.var("w", XavierInitScheme('c', 2, 1), nd.FLOAT, 2, 1)
    ((x.mmul(w) - 1.0) ** 2).mean().markAsLoss()
    sd.setTrainingConfig(TrainingConfig.Builder().updater(Adam(0.1))
                         .dataSetFeatureMapping("x").build())
    sd.fit([{"x": np.ones((4, 2), np.float32)}], 1, verbose=0)
    assert sd.updater_state.iteration == 1
    sd.save(tmp_path / "m.sdz", False)                    # ND4J: save(file, saveUpdaterState)
    assert nd.SameDiff.load(tmp_path / "m.sdz").updater_state.iteration == 0
    sd.save(tmp_path / "m.sdz", True)
    assert nd.SameDiff.load(tmp_path / "m.sdz").updater_state.iteration == 1
    assert nd.SameDiff.load(tmp_path / "m.sdz", False).updater_state.iteration == 0


@pytest.mark.parametrize("scheme, shape, check", [
    (XavierInitScheme('c', 784, 100), (784, 100), lambda a: abs(a.std() - (2 / 884) ** 0.5) < 0.005),
    (ReluInitScheme('c', 400), (400, 50), lambda a: abs(a.std() - (2 / 400) ** 0.5) < 0.005),
    (LecunUniformInitScheme('c', 300), (300, 40),
     lambda a: np.abs(a).max() <= (3 / 300) ** 0.5 + 1e-7),
    (UniformInitScheme('c', 25), (1000,), lambda a: np.abs(a).max() <= 0.2 + 1e-7),
    (ZeroInitScheme('c'), (3, 3), lambda a: not a.any()),
    (OneInitScheme('c'), (3,), lambda a: (a == 1).all()),
    (ConstantInitScheme('c', 2.5), (2, 2), lambda a: (a == 2.5).all()),
    (IdentityInitScheme('c'), (3, 3), lambda a: (a == np.eye(3)).all()),
])
def test_weight_init_scheme_classes(scheme, shape, check):
    assert isinstance(scheme, WeightInit)
    sd = nd.SameDiff.create()
    v = sd.var("v", scheme, nd.FLOAT, *shape)
    arr = v.get_arr().numpy()
    assert arr.shape == shape and arr.dtype == np.float32 and check(arr.astype(np.float64))


def test_bad_scheme_order_and_bad_unnamed_var_are_named_errors():
    with pytest.raises(GraphError, match="order must be 'c' or 'f'"):
        XavierInitScheme('x', 3, 3)
    with pytest.raises(GraphError, match="cannot interpret argument"):
        nd.SameDiff.create().var(object(), nd.FLOAT, 2)


# -- issue 11, second part: the seeds' remaining spellings ---------------------------------------

def test_seed_000_training_and_evaluation_classes_come_from_nd4py():
    config = (nd.TrainingConfig.Builder()
              .l2(1e-4)
              .updater(nd.Adam(1e-3))
              .dataSetFeatureMapping("input")
              .dataSetLabelsMapping("lables")
              .build())
    assert config.feature_mapping == ["input"] and isinstance(config.updater, Adam)
    evaluation = nd.Evaluation()
    evaluation.eval(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32))
    assert evaluation.accuracy() == 1.0
    assert nd.TrainingConfig is TrainingConfig
    assert all(callable(c) for c in (nd.Sgd, nd.Nesterovs, nd.RmsProp, nd.ROC,
                                     nd.RegressionEvaluation, nd.EvaluationBinary))


def test_seed_000_cross_entropy_takes_the_softmax_output_first():
    samediff = seed_000_topology()
    output = samediff.get_variable("output")
    labels = samediff.placeHolder("labels", nd.FLOAT, -1, 10)  # the seed's (10,) one is unbatched
    loss = samediff.loss.crossEntropy(output, labels)
    samediff.setLossVariables(loss)
    rng = np.random.default_rng(3)
    x = rng.random((4, 784), dtype=np.float32)
    y = np.eye(10, dtype=np.float32)[[1, 4, 4, 9]]
    p = samediff.output({"input": x}, "output")["output"].numpy().astype(np.float64)
    want = -np.log(p[np.arange(4), [1, 4, 4, 9]]).mean()  # mean over the batch
    got = samediff.output({"input": x, "labels": y}, loss.name)[loss.name].item()
    assert got == pytest.approx(want, rel=1e-5)
    samediff.setTrainingConfig(TrainingConfig.Builder().updater(Adam(1e-2))
                               .dataSetFeatureMapping("input").dataSetLabelsMapping("labels")
                               .build())
    history = samediff.fit((x, y), 20)  # the graph trains through the loss
    assert history.lossCurve()[-1] < 0.5 * history.lossCurve()[0]


def test_seed_004_data_type_enum():
    assert nd.DataType.FLOAT == nd.FLOAT == np.float32
    assert (nd.DataType.DOUBLE, nd.DataType.HALF, nd.DataType.LONG, nd.DataType.INT,
            nd.DataType.SHORT, nd.DataType.UBYTE, nd.DataType.BOOL) == (
        np.float64, np.float16, np.int64, np.int32, np.int16, np.uint8, np.bool_)
    samediff = nd.SameDiff.create()
    input = samediff.placeHolder("input", nd.DataType.FLOAT, -1, 784)  # noqa: A001
    assert input.dataType() == nd.DataType.FLOAT
    assert nd.DataType.UTF8 == nd.UTF8 and nd.UTF8.kind == "T"  # numpy's StringDType
    for unsupported in ("COMPRESSED", "UNKNOWN"):
        with pytest.raises(nd.NdDTypeError, match=f"DataType.{unsupported}: .*not supported"):
            getattr(nd.DataType, unsupported)


def test_nd4j_array_methods_rank_length_argmax_shape_info():
    x = nd.create([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    assert x.rank() == 2 and x.length() == 6 and x.rank == 2 and x.length == 6  # both spellings
    assert type(x.ndim) is int and type(x.size) is int and x.ndim == 2 and x.size == 6
    assert x.argMax(1).numpy().tolist() == [1, 0] and x.argMin(1).numpy().tolist() == [0, 1]
    assert x.getInt(1, 0) == 7 and x.getDouble(0, 1) == 5.0
    assert x.dataType() == nd.DataType.FLOAT
    assert x.shapeInfoToString() == ("Rank: 2, DataType: FLOAT, Offset: 0, Order: c, "
                                     "Shape: [2,3], Stride: [3,1]")
    assert nd.create(3.0).rank() == 0 and nd.create(3.0).length() == 1
    assert list(range(x.rank)) == [0, 1]  # still an int everywhere ints go


def test_seed_004_sdvariable_methods():
    samediff = nd.SameDiff.create()
    weights = samediff.var("weights", nd.DataType.FLOAT, 784, 10)
    input = samediff.placeHolder("input", nd.DataType.FLOAT, -1, 784)  # noqa: A001
    assert weights.getVariableType() == nd.VariableType.VARIABLE
    assert input.getVariableType() == nd.VariableType.PLACEHOLDER
    assert weights.getArr().shape == (784, 10) and weights.getArr(True).shape == (784, 10)
    assert input.getArr() is None
    with pytest.raises(GraphError, match=r"getArr\(true\): 'input' is a PLACEHOLDER with no value"):
        input.getArr(True)
    assert weights.dataType() == nd.DataType.FLOAT and weights.rank() == 2
    assert weights.getVarName() == "weights"
    weights.setVarName("w")
    assert weights.getVarName() == "w" and samediff.getVariable("w") is weights
    loss = input.mmul(weights).mean("loss")
    loss.markAsLoss()
    assert weights.getGradient().name == weights.gradient().name
    assert weights.getGradient().shape == (784, 10)


def test_seed_004_placeholder_to_constant_and_constant_to_variable():
    samediff = nd.SameDiff.create()
    input = samediff.placeHolder("input", nd.DataType.FLOAT, 2)  # noqa: A001
    input.setArray(nd.create([3.0, 4.0]))
    assert input.getArr().numpy().tolist() == [3.0, 4.0]
    samediff.convertToConstant(input)
    assert input.getVariableType() == nd.VariableType.CONSTANT
    assert samediff.output({}, "input")["input"].numpy().tolist() == [3.0, 4.0]

    frozen_weights = samediff.constant("frozen", nd.create([1.0, 2.0]))
    samediff.convertToVariable(frozen_weights)  # not frozen any more
    assert frozen_weights.getVariableType() == nd.VariableType.VARIABLE
    samediff.convertToConstant(frozen_weights)
    assert frozen_weights.getVariableType() == nd.VariableType.CONSTANT

    other = samediff.placeHolder("other", nd.DataType.FLOAT, 2)
    with pytest.raises(GraphError, match=r"call ph.set_array\(array\) first"):
        samediff.convertToConstant(other)
    with pytest.raises(nd.PlaceholderError):
        other.setArray(nd.create([1.0, 2.0, 3.0]))  # checked like a feed: wrong shape


def test_seed_001_rand_with_leading_data_type():
    a = nd.rand(nd.DataType.FLOAT, 128, 256)
    b = nd.randn(nd.DataType.DOUBLE, 2, 3)
    w = nd.nrand(784, 10).div(28)  # seed 003/004's Nd4j.nrand(784, 10).div(28)
    assert a.shape == (128, 256) and a.dtype == np.float32 and 0 <= a.min().item() < 1
    assert b.shape == (2, 3) and b.dtype == np.float64
    assert w.shape == (784, 10) and abs(w.std().item() - 1 / 28) < 0.005
    assert nd.rand(2, 3).shape == (2, 3)


def test_seed_001_graph_scope_begin_end_close():
    a = nd.rand(nd.DataType.FLOAT, 128, 256)
    b = nd.rand(nd.DataType.FLOAT, 256, 64)
    with nd.graphScope() as scope:  # try (GraphScope scope = Nd4j.graphScope()) {
        scope.begin()
        mm = nd.matmul(a, b)         # traced — returns LazyINDArray
        out = nd.nn.relu(mm)         # traced — wired from mm's proxy
        scope.end()                  # compiles + executes; mm and out are now real
    assert out.shapeInfoToString() == ("Rank: 2, DataType: FLOAT, Offset: 0, Order: c, "
                                       "Shape: [128,64], Stride: [64,1]")
    np.testing.assert_allclose(out.numpy(), np.maximum(a.numpy() @ b.numpy(), 0), rtol=1e-5)
    scope.close()  # idempotent after end()

    scope = nd.graphScope()  # without try-with-resources
    scope.begin()
    y = nd.exp(a)
    scope.end()
    scope.close()
    assert y.shape == (128, 256)
    with pytest.raises(nd.TracingError, match="begin\\(\\) called twice"):
        with nd.graphScope() as scope:
            scope.begin()
            scope.begin()


def test_seed_001_layer_norm_with_null_gain_and_bias():
    a = nd.rand(nd.DataType.FLOAT, 4, 8)
    b = nd.rand(nd.DataType.FLOAT, 8, 6)
    mm = nd.matmul(a, b)
    normed = nd.layerNorm(mm, None, None, True, 1)
    expected = (mm.numpy() - mm.numpy().mean(1, keepdims=True)) / np.sqrt(
        mm.numpy().var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(normed.numpy(), expected, rtol=1e-4, atol=1e-5)
    gain, bias = nd.full((6,), 2.0), nd.ones(6)
    np.testing.assert_allclose(nd.layerNorm(mm, gain, bias, False, 1).numpy(),
                               expected * 2 + 1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(nd.layer_norm(mm, gain, bias, -1).numpy(), expected * 2 + 1,
                               rtol=1e-4, atol=1e-5)  # nd4py's own order still works
    sd = nd.SameDiff.create()
    x = sd.placeHolder("x", nd.DataType.FLOAT, -1, 6)
    sd.nn.layerNorm("normed", x, None, None, True, 1)
    np.testing.assert_allclose(sd.output({"x": mm}, "normed")["normed"].numpy(), expected,
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(nd.OpError, match="int dimensions"):
        nd.layerNorm(mm, None, None, True, "1")
    with nd.graphScope():
        traced = nd.nn.gelu(nd.layerNorm(nd.matmul(a, b), None, None, True, 1))
    assert traced.shape == (4, 6)


def test_seed_004_methods_with_a_leading_output_name():
    samediff = nd.SameDiff.create()
    input = samediff.placeHolder("input", nd.DataType.FLOAT, -1, 3)  # noqa: A001
    labels = samediff.placeHolder("labels", nd.DataType.FLOAT, -1, 2)
    weights = samediff.var("weights", nd.DataType.FLOAT, 3, 2)
    bias = samediff.var("bias", nd.DataType.FLOAT, 2)
    regression_cost = input.mmul(weights).sub("regression_prediction", bias) \
        .squaredDifference(labels)
    error_vector = samediff.getVariable("regression_prediction").sub(labels)
    result = regression_cost.mean("loss")
    assert result.name == "loss" and error_vector.shape == (-1, 2)
    feed = {"input": np.ones((4, 3), np.float32), "labels": np.ones((4, 2), np.float32)}
    assert samediff.output(feed, "loss")["loss"].item() == 1.0
    assert regression_cost.mean("m0", 0).shape == (2,)
    assert input.castTo("float64").dtype == np.float64          # a string argument, not a name
    assert input.castTo("as_double", "float64").name == "as_double"
    with pytest.raises(nd.OpError, match=r"expected v.mean\(\[name: str\], dims="):
        regression_cost.mean("loss2", "0")
    with pytest.raises(nd.OpError, match=r"expected v.sub\(\[name: str\], y\)"):
        input.sub("a", bias, labels)


def test_seed_004_int_variables_refused_and_placeholders_have_no_gradient():
    samediff = nd.SameDiff.create()
    with pytest.raises(GraphError, match="VARIABLEs are trainable and must be floating point"):
        samediff.var("v", np.arange(3))
    with pytest.raises(GraphError, match="only floating-point CONSTANTs can become VARIABLEs"):
        samediff.convertToVariable(samediff.constant("c", np.arange(3)))
    input = samediff.placeHolder("input", nd.DataType.FLOAT, -1, 3)  # noqa: A001
    weights = samediff.var("weights", nd.DataType.FLOAT, 3, 1)
    input.mmul(weights).mean("loss").markAsLoss()
    with pytest.raises(nd.GradientError, match="'input' is a PLACEHOLDER: placeholders have no "
                                               "gradient"):
        input.getGradient()
    grads = samediff.calculateGradients({"input": np.ones((2, 3), np.float32)}, "input")
    assert grads["input"].shape == (2, 3)  # d(loss)/d(input) on request, as the error says


def test_seed_001_class_style_udf(tmp_path):
    from samediff.udf import UserDefinedCustomOp, UserDefinedOp, unregister

    @UserDefinedOp                               # registers with the op registry
    class MyAddUdf(UserDefinedCustomOp):
        # No-arg constructor required for save/load reconstruction
        def __init__(self, sameDiff=None, x=None, y=None):  # noqa: N803 - the seed's names
            super().__init__(sameDiff, [x, y] if x is not None else None)

        def opName(self):
            return "my_add_udf_class"            # unique name used in serialization

        def getNumOutputs(self):
            return 1

        def calculateOutputDataTypes(self, inputTypes):  # noqa: N803
            return [inputTypes[0]]

        def calculateOutputShape(self):
            return [self.inputArguments[0].shapeDescriptor()]

        def exec(self):
            self.outputArguments.append(nd.add(self.inputArguments[0], self.inputArguments[1]))

        def doDiff(self, grad):
            return [grad[0], grad[0]]            # one gradient per input

        def propertiesForFunction(self):
            return {}

        def setPropertiesForFunction(self, props):
            pass

    try:
        sd = nd.SameDiff.create()
        x = sd.placeHolder("x", nd.DataType.FLOAT, -1, 128)
        y = sd.placeHolder("y", nd.DataType.FLOAT, -1, 128)
        outputs = sd.doUdf(MyAddUdf(sd, x, y))
        result = outputs[0]
        loss = result.mean("loss")
        loss.markAsLoss()
        assert result.shape == (-1, 128) and result.dataType() == nd.DataType.FLOAT
        sd.save(tmp_path / "model_with_udf.sdnb", False)
        reloaded = nd.SameDiff.load(tmp_path / "model_with_udf.sdnb", False)
        rng = np.random.default_rng(0)
        feed = {"x": rng.random((4, 128), np.float32), "y": rng.random((4, 128), np.float32)}
        expected = float(np.mean(feed["x"] + feed["y"]))
        assert reloaded.output(feed, "loss")["loss"].item() == pytest.approx(expected, rel=1e-6)
        grads = reloaded.calculateGradients(feed, "x", "y")
        np.testing.assert_allclose(grads["y"].numpy(), np.full((4, 128), 1 / 512), rtol=1e-6)
        a, b = nd.create([1.0, 2.0]), nd.create([10.0, 20.0])
        assert nd.my_add_udf_class(a, b).numpy().tolist() == [11.0, 22.0]  # eager too
        with nd.graphScope():
            lazy = a.my_add_udf_class(b)
        assert lazy.numpy().tolist() == [11.0, 22.0]
    finally:
        unregister("my_add_udf_class")


def test_class_style_udf_properties_and_errors():
    from samediff.udf import UserDefinedCustomOp, UserDefinedOp, unregister

    @UserDefinedOp
    class ClipAbove(UserDefinedCustomOp):
        def __init__(self, sameDiff=None, x=None, threshold=1.0):  # noqa: N803
            super().__init__(sameDiff, [x] if x is not None else None)
            self.threshold = threshold

        def opName(self):
            return "clip_above_class"

        def exec(self):
            self.outputArguments.append(nd.minimum(self.inputArguments[0], self.threshold))

        def propertiesForFunction(self):
            return {"threshold": self.threshold}

        def setPropertiesForFunction(self, props):
            self.threshold = float(props["threshold"])

    try:
        sd = nd.SameDiff.create()
        x = sd.placeHolder("x", nd.DataType.FLOAT, 3)
        (out,) = sd.doUdf(ClipAbove(sd, x, 0.5))
        feed = {"x": np.array([0.0, 0.7, 2.0], np.float32)}
        assert sd.output(feed, out.name)[out.name].numpy().tolist() == [0.0, 0.5, 0.5]
        out.mean("loss").markAsLoss()
        with pytest.raises(nd.NdError, match="clip_above_class"):  # no doDiff: no gradient
            sd.calculateGradients(feed, "x")
    finally:
        unregister("clip_above_class")

    class NotDecorated(UserDefinedCustomOp):
        def opName(self):
            return "not_decorated"
    with pytest.raises(nd.OpError, match="decorate the class with @UserDefinedOp"):
        nd.SameDiff.create().doUdf(NotDecorated())
    with pytest.raises(nd.OpError, match="not a UserDefinedCustomOp subclass"):
        UserDefinedOp(int)


def test_class_style_udf_with_two_outputs(tmp_path):
    from samediff.udf import UserDefinedCustomOp, UserDefinedOp, unregister

    @UserDefinedOp
    class SumAndProduct(UserDefinedCustomOp):
        def __init__(self, sameDiff=None, x=None, y=None):  # noqa: N803
            super().__init__(sameDiff, [x, y] if x is not None else None)

        def opName(self):
            return "sum_and_product_class"

        def getNumOutputs(self):
            return 2

        def exec(self):
            x, y = self.inputArguments
            self.outputArguments += [nd.add(x, y), nd.mul(x, y)]

        def doDiff(self, grad):
            x, y = self.inputArguments
            g_sum, g_prod = grad
            gx = [g for g in (g_sum, None if g_prod is None else g_prod * y) if g is not None]
            gy = [g for g in (g_sum, None if g_prod is None else g_prod * x) if g is not None]
            return [sum(gx[1:], gx[0]), sum(gy[1:], gy[0])]

    try:
        sd = nd.SameDiff.create()
        x = sd.placeHolder("x", nd.DOUBLE, -1, 3)
        y = sd.var("y", np.array([1.0, -2.0, 0.5]))
        total, product = sd.doUdf(SumAndProduct(sd, x, y))
        assert total.shape == product.shape == (-1, 3)
        (total.sum() + 3.0 * product.sum()).markAsLoss()
        feed = {"x": np.array([[2.0, 3.0, 4.0], [1.0, 1.0, 1.0]])}
        got = sd.output(feed, total.name, product.name)
        np.testing.assert_array_equal(got[total.name].numpy(), feed["x"] + [1.0, -2.0, 0.5])
        np.testing.assert_array_equal(got[product.name].numpy(), feed["x"] * [1.0, -2.0, 0.5])
        grads = sd.calculateGradients(feed, "x", "y")
        np.testing.assert_allclose(grads["y"].numpy(), 2 + 3 * feed["x"].sum(axis=0))
        np.testing.assert_allclose(grads["x"].numpy(), 1 + 3 * np.array([[1.0, -2.0, 0.5]] * 2))
        sd.save(tmp_path / "two.sdnb")
        again = nd.SameDiff.load(tmp_path / "two.sdnb")
        np.testing.assert_array_equal(again.output(feed, product.name)[product.name].numpy(),
                                      got[product.name].numpy())
        s, p = nd.sum_and_product_class(nd.create([2.0]), nd.create([5.0]))  # eager: a tuple
        assert (s.item(), p.item()) == (7.0, 10.0)

        only_sum = nd.SameDiff.create()  # the product unused: doDiff gets None for it
        v = only_sum.var("v", np.array([1.0, 2.0]))
        only_sum.doUdf(SumAndProduct(only_sum, v, v))[0].sum().markAsLoss()
        np.testing.assert_array_equal(only_sum.calculateGradients({}, "v")["v"].numpy(), [2, 2])
    finally:
        unregister("sum_and_product_class")

    @UserDefinedOp
    class WrongCount(UserDefinedCustomOp):
        def opName(self):
            return "wrong_count_class"

        def getNumOutputs(self):
            return 2

        def exec(self):
            self.outputArguments.append(self.inputArguments[0])

    try:
        with pytest.raises(nd.OpError, match=r"wrong_count_class: exec\(\) must append 2"):
            nd.wrong_count_class(nd.create([1.0]))
    finally:
        unregister("wrong_count_class")


# --- ND4J's positional call forms (issue 21, item 5): references from first principles ---------

M = np.array([[1.0, 4.0, 2.0, 8.0], [3.0, 0.0, 7.0, 5.0], [6.0, 2.0, 9.0, 1.0]])


def _var(rows: list[list[float]], bias_corrected: bool) -> list[float]:
    """Variance of each list: squared deviations from the mean over n (or n - 1)."""
    out = []
    for r in rows:
        mean = sum(r) / len(r)
        out.append(sum((v - mean) ** 2 for v in r) / (len(r) - bias_corrected))
    return out


def test_split_reads_numsplit_then_splitdim():
    x = nd.create(M)
    parts = nd.split(x, 2, 1)                       # ND4J: split(input, numSplit, splitDim)
    assert [p.numpy().tolist() for p in parts] == [[r[:2] for r in M.tolist()],
                                                   [r[2:] for r in M.tolist()]]
    assert [p.shape for p in x.split(4, 1)] == [(3, 1)] * 4
    sd = nd.SameDiff.create()
    v = sd.placeHolder("in", nd.DOUBLE, -1, 4)       # unknown rows: the old reading (sizes
    a, b = sd.split("parts", v, 2, 1)                # (2, 1) on dim 0) failed only at run time
    assert a.shape == b.shape == (-1, 2)
    out = sd.output({"in": M}, "parts", "parts:1")
    assert out["parts:1"].numpy().tolist() == [r[2:] for r in M.tolist()]
    assert [p.shape for p in x.split([1, 2], 0)] == [(1, 4), (2, 4)]  # sizes: one sequence
    with pytest.raises(nd.OpError, match=r"split: split\(x, 1, 1, 1\) is ambiguous.*"
                                         r"split\(x, \[1, 1, 1\], axis=0\)"):
        sd.split(v, 1, 1, 1)                         # refused when called, not when run


def test_variance_and_std_read_biascorrected_then_dims():
    x = nd.create(M)
    cols = [list(c) for c in zip(*M.tolist())]
    np.testing.assert_allclose(x.variance(True, 0).numpy(), _var(cols, True))
    np.testing.assert_allclose(x.variance(False, 0).numpy(), _var(cols, False))
    np.testing.assert_allclose(x.std(True, 1).numpy(), np.sqrt(_var(M.tolist(), True)))
    kept = x.standardDeviation(True, True, 1)        # (biasCorrected, keepDims, dims...)
    np.testing.assert_allclose(kept.numpy(), np.sqrt(_var(M.tolist(), True))[:, None])
    np.testing.assert_allclose(x.variance(True).item(), _var([M.ravel().tolist()], True)[0])
    sd = nd.SameDiff.create()
    v = sd.placeHolder("in", nd.DOUBLE, -1, 4)
    out = sd.variance("var0", v, True, 0)
    np.testing.assert_allclose(sd.output({"in": M}, out)["var0"].numpy(), _var(cols, True))
    with pytest.raises(nd.OpError, match=r"got multiple values for argument 'bias_corrected'"):
        x.variance(True, 0, biasCorrected=False)


def test_reductions_and_cumsum_read_nd4js_flags_first():
    x = nd.create(M)
    assert x.sum(True, 1).numpy().tolist() == [[sum(r)] for r in M.tolist()]  # (keepDims, dims)
    assert x.argmax(True, 1).numpy().tolist() == [[r.index(max(r))] for r in M.tolist()]
    row = M[0].tolist()
    exclusive = [sum(row[:i]) for i in range(len(row))]
    assert x.cumsum(True, False, 1).numpy()[0].tolist() == exclusive  # (exclusive, reverse, axis)
    assert x.cumsum(False, True, 1).numpy()[0].tolist() == [sum(row[i:]) for i in range(4)]
    with pytest.raises(nd.OpError, match=r"cumsum: expected ND4J's cumsum\(x, exclusive, "
                                         r"reverse, axis...\) with bool flags then one int axis"):
        x.cumsum(True, False, 0, 1)


def test_concat_and_stack_read_a_leading_dimension():
    a, b = nd.create(M[:2]), nd.create(M[2:])
    assert nd.concat(0, a, b).numpy().tolist() == M.tolist()          # Nd4j.concat(dim, arrays...)
    assert nd.concat(1, a, a).numpy().tolist() == [r + r for r in M[:2].tolist()]
    assert nd.stack(0, a, a).shape == (2, 2, 4)
    # nd4py's and numpy's forms are unchanged: the arrays first, as one sequence
    assert nd.concat([a, b], axis=0).numpy().tolist() == M.tolist()
    assert np.concatenate([a, b], axis=0).numpy().tolist() == M.tolist()
    sd = nd.SameDiff.create()
    va, vb = sd.constant("a", M[:2]), sd.constant("b", M[2:])
    assert sd.concat("c", 0, va, vb).eval().numpy().tolist() == M.tolist()
    with pytest.raises(nd.OpError, match=r"concat\(\) got multiple values for argument 'axis'"):
        nd.concat(0, a, b, axis=1)


def test_layer_norm_takes_null_gain_and_bias_before_keywords():
    x = nd.create(M)
    want = [[(v - sum(r) / 4) / (sum((u - sum(r) / 4) ** 2 for u in r) / 4 + 1e-5) ** 0.5
             for v in r] for r in M.tolist()]
    np.testing.assert_allclose(nd.layer_norm(x, None, None, dims=1).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(nd.layer_norm(x, None, None, True, 1).numpy(), want, rtol=1e-6)


def test_creation_and_random_read_nd4js_datatype_positions():
    sd = nd.SameDiff.create()
    assert sd.linspace(nd.DOUBLE, 0.0, 1.0, 5).eval().numpy().tolist() == [0, .25, .5, .75, 1]
    normal = sd.random.normal(0.0, 1.0, nd.FLOAT, 3, 4)     # (mean, stddev, dataType, shape...)
    assert normal.shape == (3, 4) and normal.dtype == np.float32
    low_high = sd.random.uniform(2.0, 3.0, nd.DOUBLE, [50]).eval().numpy()
    assert low_high.shape == (50,) and low_high.min() >= 2.0 and low_high.max() < 3.0
    assert sd.random.bernoulli(1.0, nd.FLOAT, 2, 2).eval().numpy().tolist() == [[1, 1], [1, 1]]


def test_repeat_with_two_ints_is_ambiguous_and_refused():
    x = nd.create(M)
    with pytest.raises(nd.OpError, match=r"repeat: repeat\(x, 2, 1\) is ambiguous.*repeats="):
        x.repeat(2, 1)
    assert x.repeat(2, axis=1).shape == (3, 8)


# --- errors that say where a name came from (issue 21, "Errors") -------------------------------

def _labelled_graph() -> nd.SameDiff:
    sd = nd.SameDiff.create()
    x = sd.placeHolder("x", nd.FLOAT, -1, 2)
    y = sd.placeHolder("label", nd.FLOAT, -1, 1)
    w = sd.var("w", np.ones((2, 1), np.float32))
    p = sd.nn.sigmoid("probs", x.mmul(w))
    ((p - y) ** 2).mean().markAsLoss()
    sd.setTrainingConfig(TrainingConfig.Builder().updater(Adam(0.1)).dataSetFeatureMapping("x")
                         .dataSetLabelsMapping("label").build())
    return sd


def test_unknown_output_lists_outputs_with_a_did_you_mean():
    sd = _labelled_graph()
    with pytest.raises(KeyError, match=r"output: no variable named 'probz' in this graph; "
                                       r"did you mean 'probs'\? The graph's outputs: 'mean'.*"
                                       r"'probs'"):
        sd.output({"x": np.ones((1, 2), np.float32)}, "probz")


def test_a_missing_label_placeholder_says_it_came_from_label_mapping():
    sd = _labelled_graph()
    batch = {"x": np.ones((4, 2), np.float32)}
    pattern = (r"label placeholder 'label' .*missing from the batch \(got \['x'\]\); it is "
               r"expected because .*label_mapping.*\['label'\].*dicts with a 'label' key")
    with pytest.raises(TrainingError, match=pattern):
        sd.fit([batch], 1, verbose=0)
    with pytest.raises(TrainingError, match=pattern):
        sd.evaluate([batch], "probs", nd.Evaluation())
    assert sd.updater_state is None or sd.updater_state.iteration == 0  # nothing was trained
