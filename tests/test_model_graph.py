"""The derived model's graph edits: the same function in fewer nodes, and nothing else touched."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from codeloupe.embed.model_graph import simplify


def _scalar(name: str, value: float) -> onnx.TensorProto:
    return helper.make_tensor(name, TensorProto.FLOAT, [], [value])


def _model(path: Path) -> Path:
    """x -> softmax -> NaN guard -> GELU spelled out -> y; and a look-alike guard over another tensor (z)."""
    nodes = [
        helper.make_node("Softmax", ["x"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["p_nan"]),
        helper.make_node("Where", ["p_nan", "zero", "p"], ["q"]),
        helper.make_node("Div", ["q", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["half", "a"], ["h"]),
        helper.make_node("Mul", ["q", "h"], ["y"]),
        # Not a guard of its own input: Where(IsNaN(x), 0, p) must stay.
        helper.make_node("IsNaN", ["x"], ["x_nan"]),
        helper.make_node("Where", ["x_nan", "zero", "p"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "patterns",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8])],
        [_scalar("zero", 0.0), _scalar("sqrt2", math.sqrt(2)), _scalar("one", 1.0), _scalar("half", 0.5)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def _run(path: Path, x: np.ndarray) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def test_nan_guards_are_dropped_and_gelu_fused_without_changing_the_outputs(tmp_path: Path) -> None:
    path = _model(tmp_path / "model.onnx")
    x = np.random.default_rng(0).normal(size=(2, 8)).astype(np.float32) * 4
    before = _run(path, x)
    simplify(path)
    ops = [node.op_type for node in onnx.load(str(path)).graph.node]
    assert ops == ["Softmax", "Gelu", "IsNaN", "Where"]  # the look-alike guard over x is kept
    onnx.checker.check_model(onnx.load(str(path)))
    after = _run(path, x)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(after[1], before[1])
