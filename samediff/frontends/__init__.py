"""Front ends: the ways a Python call names an op — tables over the one op table.

The op table (``samediff/ops``) says what an op *is*: its own name (also its serialization
key), inputs, attributes, inference, implementation, gradient and the facts the compiler reads,
plus its group (``namespace=``: math, nn, linalg...). A *front end* says how users *reach* ops,
and is only data plus one function, gathered in a ``Frontend`` and checked against the op table
when it is built (at import: a table naming a missing op, or two ops under one name, fails
there, naming them):

* ``names``: op name -> this front end's other names for it (ND4J's ``leakyRelu``);
* ``namespaces``: its layout, namespace -> the op groups it shows (``sd.nn``, ``nd.base``);
* ``split_call``: its argument rule, a Python call -> (inputs, attributes, output name);
* ``inplace``: ops that also get an in-place ``<op>i`` method.

``nd4j.py`` is the ND4J front end; ``nd.*``, the methods of arrays and variables, ``sd.*`` and
user-defined ops read it. ``numpy.py`` is the numpy front end the same way: numpy's names
(``np.subtract`` for ``sub``, ``np.var`` for ``variance``...), its keywords (``axis``,
``keepdims``, ``ddof``), and the numpy protocols of ``NDArray`` (``np.exp(x)``, ``np.mean(x)``,
``x[[0, 2]]``) that read those tables — no op is defined twice and no op changes.
``array_api.py`` is the array API standard's front end: its names as tables (``UNARY``,
``REDUCTIONS``, ``FFT_AXIS``...), its dtypes and its call rules; the namespace
``nd4py.array_api`` is built from it (a closed namespace, so it has no ``Frontend`` of op
groups). The mechanism in a few lines:

>>> from samediff import bind, create
>>> from samediff.frontends import ND4J, Frontend, Namespace
>>> from samediff.namespaces import OpNamespace
>>> KEYWORDS = {"axis": "dims", "keepdims": "keep_dims"}
>>> def numpy_call(op, args, kwargs, leading_name=False):
...     return ND4J.split_call(op, args, {KEYWORDS.get(k, k): v for k, v in kwargs.items()})
>>> NUMPY = Frontend("numpy", names={"mean": "average", "floor_div": "floor_divide"},
...                  namespaces={"linalg": Namespace(("linalg",))}, split_call=numpy_call)
>>> npx = OpNamespace("np", NUMPY, None, bind)
>>> npx.average(create([[1.0, 2.0], [3.0, 5.0]]), axis=1, keepdims=True).numpy().tolist()
[[1.5], [4.0]]
>>> Frontend("typo", names={"meen": "average"}, namespaces={}, split_call=numpy_call)
Traceback (most recent call last):
    ...
samediff.frontends.common.FrontendTableError: front end 'typo': names refers to op 'meen', which is not in the op table
"""
from .common import Frontend, FrontendTableError, Namespace, check, names_to_ops
from .nd4j import ND4J
from .numpy import NUMPY

__all__ = ["Frontend", "FrontendTableError", "Namespace", "ND4J", "NUMPY", "check",
           "names_to_ops"]
