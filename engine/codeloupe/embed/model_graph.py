"""Edits to the derived MiniLM graph that onnxruntime's own optimisers do not make (measured by
bench/embed_bench.py; the README has the table), and one that keeps its integer products exact on processors
whose int8 kernel saturates (`unsigned_weights`).

The exported graph spells two things out node by node: after each softmax a guard that zeroes NaN rows, and
GELU as five elementwise nodes. onnxruntime does not fuse either in this export, so each costs a pass over a
whole tensor per layer. The edits are made once, when the model is derived, on the file the quantiser wrote.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

MS_DOMAIN = "com.microsoft"  # onnxruntime's contrib operators (Gelu)


def simplify(path: Path) -> None:
    """Drop the NaN guards and fuse GELU in the model at `path`, in place."""
    model = onnx.load(str(path))
    _GraphEdit(model.graph).drop_nan_guards().fuse_gelu().apply()
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    onnx.save(model, str(path))


def int8_pairs_saturate() -> bool:
    """Whether onnxruntime's uint8 x int8 product loses precision on this processor.

    On x86 without VNNI (AVX2, AVX-512 before Cascade Lake, AMD before Zen 4) the kernel adds each pair of
    products in int16 with saturation (`vpmaddubsw`), so 255 x 127 + 255 x 127 becomes 32767; with VNNI, AMX or
    on Arm the sum is exact. Asked of the kernel itself rather than of the processor's feature flags."""
    return _saturating_product() != 2 * 255 * 127


@functools.cache
def _saturating_product() -> int:
    import onnxruntime as ort

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "pair_probe",
        [helper.make_tensor_value_info("a", onnx.TensorProto.UINT8, [1, 2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.INT32, [1, 1])],
        [numpy_helper.from_array(np.full((2, 1), 127, np.int8), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return int(session.run(None, {"a": np.full((1, 2), 255, np.uint8)})[0][0, 0])


def unsigned_weights(path: Path) -> None:
    """Every integer MatMul's int8 weights (and their zero points) as uint8 offset by 128, in place.

    The product is the same integers, (a - za) x (w + 128 - (zw + 128)), so the vectors are the same as the
    int8 file's on a processor whose kernel is exact; onnxruntime then takes its uint8 x uint8 kernel, which
    widens to int16 before multiplying and never saturates (about 10% more CPU a chunk on an AVX2 AMD EPYC
    than the saturating one: bench/embed_bench.py, 715 golden chunks). Only for processors where `int8_pairs_saturate`: elsewhere the int8 file is
    exact and faster."""
    model = onnx.load(str(path))
    initializers = {t.name: t for t in model.graph.initializer}
    shifted: set[str] = set()
    for node in model.graph.node:
        weights = initializers.get(node.input[1]) if node.op_type == "MatMulInteger" else None
        if weights is None or (node.input[1] not in shifted and weights.data_type != onnx.TensorProto.INT8):
            continue  # weights computed at run time, or already unsigned: nothing to shift
        if len(node.input) < 4 or not node.input[3]:  # no zero point: int8 weights centred on 0
            zero = f"{node.input[1]}_u8_zero_point"
            if zero not in initializers:
                model.graph.initializer.append(numpy_helper.from_array(np.array(0, np.int8), zero))
                initializers[zero] = model.graph.initializer[-1]  # append copied the message: edit the graph's
            while len(node.input) < 3:
                node.input.append("")
            node.input[2:] = [node.input[2], zero]
        for name in (node.input[1], node.input[3]):
            tensor = initializers.get(name)
            if tensor is None or name in shifted:
                continue
            values = numpy_helper.to_array(tensor)
            tensor.CopyFrom(numpy_helper.from_array((values.astype(np.int16) + 128).astype(np.uint8), name))
            shifted.add(name)
    onnx.save(model, str(path))


class _GraphEdit:
    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.made_by = {out: node for node in graph.node for out in node.output}
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.dropped: list[onnx.NodeProto] = []
        self.bypass: dict[str, str] = {}  # a dropped node's output -> the tensor its readers read instead
        self.added: dict[int, onnx.NodeProto] = {}  # id of a dropped node -> the node taking its place

    def drop_nan_guards(self) -> _GraphEdit:
        """`Where(IsNaN(p), 0, p)` after each softmax -> `p`.

        A softmax row is NaN only when every key of the window is masked, and a window always has its [CLS]
        token, so the guard never changes a value here: the vectors are bit-identical without it."""
        for node in self.graph.node:
            test = self.made_by.get(node.input[0]) if node.op_type == "Where" else None
            if test is not None and test.op_type == "IsNaN" and test.input[0] == node.input[2] \
                    and len(self.readers[test.output[0]]) == 1:
                self.bypass[node.output[0]] = node.input[2]
                self.dropped += [node, test]
        return self

    def fuse_gelu(self) -> _GraphEdit:
        """`x * (0.5 * (1 + erf(x / sqrt 2)))` -> onnxruntime's `Gelu(x)` (the same function, one kernel)."""
        for erf in [n for n in self.graph.node if n.op_type == "Erf"]:
            div = self.made_by.get(erf.input[0])
            if div is None or div.op_type != "Div" or not self._is(div.input[1], math.sqrt(2)):
                continue
            add = self._only_reader(erf, "Add")
            half = self._only_reader(add, "Mul")
            times_x = self._only_reader(half, "Mul")
            if add is None or half is None or times_x is None or not self._other_is(add, erf, 1.0) \
                    or not self._other_is(half, add, 0.5) or div.input[0] not in times_x.input:
                continue
            self.dropped += [div, erf, add, half, times_x]
            # In the place of the Div, which already comes after x is made.
            self.added[id(div)] = helper.make_node("Gelu", [div.input[0]], [times_x.output[0]], domain=MS_DOMAIN,
                                                   name=f"{times_x.name}_gelu")
        return self

    def apply(self) -> None:
        dropped = {id(node) for node in self.dropped}
        nodes = [self.added.get(id(node), node) for node in self.graph.node
                 if id(node) not in dropped or id(node) in self.added]
        del self.graph.node[:]
        for node in nodes:
            for k, name in enumerate(node.input):
                node.input[k] = self.bypass.get(name, name)
            self.graph.node.append(node)

    def _only_reader(self, node: onnx.NodeProto | None, op_type: str) -> onnx.NodeProto | None:
        readers = self.readers.get(node.output[0], []) if node is not None else []
        return readers[0] if len(readers) == 1 and readers[0].op_type == op_type else None

    def _other_is(self, node: onnx.NodeProto, source: onnx.NodeProto, value: float) -> bool:
        """`node` takes `source`'s output and a constant `value`."""
        others = [name for name in node.input if name != source.output[0]]
        return len(others) == 1 and self._is(others[0], value)

    def _is(self, name: str, value: float) -> bool:
        constant = self.constants.get(name)
        return constant is not None and constant.size == 1 and bool(np.isclose(float(constant.item()), value))
