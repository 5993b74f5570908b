"""``decode_image`` (samediff/ops/image.py) beyond its registry rows (tests/op_samples_image.py):
named errors for bytes that are no image, for a missing Pillow and for inputs of the wrong
type, and ONNX's ImageDecoder on a JPEG against onnx.reference (the same decoder: equal)."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import OpError

PIL = pytest.importorskip("PIL.Image")

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples_image import PIXELS, png
except ImportError:  # ... or tests/ became one
    from tests.op_samples_image import PIXELS, png


def test_bytes_that_are_no_image_are_named():
    with pytest.raises(OpError, match="decode_image.*cannot decode 4 bytes as an image"):
        nd.image.decode_image(nd.create(np.array([1, 2, 3, 4], np.uint8)))
    truncated = png(PIXELS)[:-30]  # (the last chunks cut off)
    with pytest.raises(OpError, match="decode_image.*cannot decode"):
        nd.image.decode_image(nd.create(truncated))


def test_without_pillow_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # (import PIL now raises ImportError)
    with pytest.raises((ImportError, OpError), match=r"decode_image needs Pillow.*pip install "
                       r"'nd4py\[image\]'"):
        nd.image.decode_image(nd.create(png(PIXELS)))


def test_the_input_must_be_one_dimensional_bytes():
    sd = nd.SameDiff.create()
    for dtype, shape in ((nd.FLOAT, (-1,)), (nd.UBYTE, (2, -1))):
        x = sd.placeholder(f"x{len(shape)}{dtype}", dtype, *shape)
        with pytest.raises(OpError, match="1-D uint8 tensor"):
            sd.image.decode_image(x)
    with pytest.raises(Exception, match="pixel_format must be one of RGB, BGR, Grayscale"):
        sd.image.decode_image(sd.placeholder("y", nd.UBYTE, -1), pixel_format="CMYK")


@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_onnx_image_decoder_on_a_jpeg_equals_the_reference(pixel_format):
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from samediff.onnx.backend import run
    buf = io.BytesIO()
    PIL.fromarray(np.kron(PIXELS, np.ones((4, 4, 1), np.uint8))).save(buf, format="JPEG")
    data = np.frombuffer(buf.getvalue(), np.uint8)
    node = helper.make_node("ImageDecoder", ["x"], ["y"], pixel_format=pixel_format)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.UINT8, ["n"])], [helper.make_tensor_value_info(
            "y", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    want = ReferenceEvaluator(model).run(None, {"x": data})[0]
    got = run(model, [data])[0]
    assert got.dtype == np.uint8 and got.shape == want.shape == (12, 20, want.shape[2])
    np.testing.assert_array_equal(got, want)
