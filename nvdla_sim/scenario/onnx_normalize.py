"""Normalise an ONNX model before lowering: what exporters write -> constants the importer can read.

Uses onnx's own machinery rather than hand-written folding:

- the version converter (`onnx.version_converter`) brings opsets 7..10 up to 11, where Clip, Pad
  and Reshape take their bounds / pads / shapes as inputs (one form for the importer to read),
  and newer opsets than 21 down to 21;
- shape inference (`onnx.shape_inference`) gives every intermediate tensor its static shape, so a
  `Shape` of a tensor whose dimensions are all known is a constant;
- the reference evaluator (`onnx.reference`) evaluates every node whose inputs are all constants
  (ConstantOfShape weights, Shape/Gather/Concat/Unsqueeze feeding a Reshape, Reshape/Transpose of
  weights, Unsqueeze of batch-norm constants...), and the results become initializers.

Graph inputs that have an initializer (IR 3 style, as the classic model-zoo files list their
weights) are constants, not model inputs.  Accepted: IR versions 3..10 (up to what the installed
onnx writes), default-domain opsets 7..21.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import NvdlaSimError


@dataclass
class Normalized:
    """A model after normalisation: the graph still to lower, its constants, ONNX shapes."""
    model: object                                # onnx.ModelProto without initializers
    consts: dict[str, np.ndarray]                # constant tensors the graph reads
    shapes: dict[str, tuple[int, ...]]           # static ONNX shapes (batch included) by tensor

MIN_IR, MAX_IR = 3, 10
MIN_OPSET, MAX_OPSET = 7, 21
CONVERT_BELOW = 11                      # opsets below this are converted to it
# Nodes never folded: random generators (a different draw each run) and anything with a subgraph.
_NOT_FOLDABLE = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                 "Multinomial", "Bernoulli", "If", "Loop", "Scan", "Dropout"}


def _default_opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def check_versions(model, where: str) -> int:
    """The model's default-domain opset, after checking the IR version and domains are accepted."""
    import onnx
    ir = int(model.ir_version)
    newest = max(MAX_IR, int(onnx.IR_VERSION))     # what the installed onnx writes by default
    if not MIN_IR <= ir <= newest:
        raise NvdlaSimError(f"{where}: IR version {ir} (accepted: {MIN_IR} to {newest})")
    opset = _default_opset(model)
    known = int(onnx.defs.onnx_opset_version())      # the newest opset the installed onnx knows
    if not MIN_OPSET <= opset <= max(known, MAX_OPSET):
        raise NvdlaSimError(f"{where}: opset {opset} (accepted: {MIN_OPSET} to {MAX_OPSET}; up to "
                            f"{known}, the installed onnx's newest, converted down to {MAX_OPSET})")
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            label = node.name or (node.output[0] if node.output else "?")
            raise NvdlaSimError(f"{where}: node '{label}' ({node.op_type}) is in domain "
                                f"'{node.domain}' (only the default ONNX domain is supported)")
    return opset


def check_model(model, where: str) -> None:
    """onnx's own checker (structure, attribute types, opset of every node), first line of its
    complaint.  A model above protobuf's 2 GB limit cannot be checked in memory: skipped."""
    import onnx
    # A graph input/output of unknown rank (no shape) is common in hand-built models and harmless
    # here (shape inference fills it in): give it an unknown shape while the checker runs.
    unshaped = [vi for vi in list(model.graph.input) + list(model.graph.output)
                if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")]
    for vi in unshaped:
        vi.type.tensor_type.shape.SetInParent()
    try:
        if model.ByteSize() < (1 << 31) - 1:
            onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise NvdlaSimError(f"{where}: the ONNX checker refuses the model ({first})") from None
    finally:
        for vi in unshaped:
            vi.type.tensor_type.ClearField("shape")


def _initializer(t, where: str) -> np.ndarray:
    """An initializer's array; a tensor whose dims do not match its data is refused by name."""
    from onnx import numpy_helper
    try:
        return numpy_helper.to_array(t)
    except Exception as exc:       # ValueError (size), TypeError (data type), protobuf errors
        raise NvdlaSimError(f"{where}: initializer '{t.name}' dims {list(t.dims)} do not match "
                            f"its data ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None


def check_inference_bounds(model, where: str, opset: int) -> None:
    """Refuse, before onnx's shape inference runs, the sizes that make it overflow: a negative or
    int64-wrapped dimension reaching a later node's inference trips a C++ assertion that aborts
    the process (onnx 1.23: a Resize by 1e30 then a Slice).  Graph input dimensions above
    MAX_DIM^2 and Resize / Upsample constant scales outside 0..MAX_DIM (NaN, inf, negative) or
    sizes outside 0..MAX_DIM^2 are one-line errors naming the input or the node; the importer
    checks the tighter rules (integer up-sampling, 1..MAX_DIM outputs) after inference."""
    from onnx import numpy_helper

    from ..compiler.support import MAX_DIM
    limit = MAX_DIM ** 2
    for inp in model.graph.input:
        dims = [d.dim_value for d in inp.type.tensor_type.shape.dim if d.HasField("dim_value")]
        if any(not 0 <= d <= limit for d in dims):
            raise NvdlaSimError(f"{where}: input '{inp.name}' has shape {dims}: a dimension "
                                f"outside 0..{limit} (NVDLA's largest cube dimension is {MAX_DIM})")
    tensors = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            tensors.update({node.output[0]: a.t for a in node.attribute if a.name == "value"})
    for node in model.graph.node:
        if node.op_type not in ("Resize", "Upsample"):
            continue
        names = list(node.input)
        slots = ((2, "scales"), (3, "sizes")) if node.op_type == "Resize" and opset >= 11 \
            else ((1, "scales"),)
        found = [(key, names[i]) for i, key in slots if len(names) > i and names[i] in tensors]
        values = [("scales", np.asarray(a.floats, np.float64)) for a in node.attribute
                  if a.name == "scales"]
        for key, name in found:
            try:
                values.append((key, np.asarray(numpy_helper.to_array(tensors[name]), np.float64)))
            except Exception:        # a corrupt tensor: _initializer names it
                continue
        for key, v in values:
            top = MAX_DIM if key == "scales" else limit
            if not np.all((v >= 0) & (v <= top)):     # (NaN fails both)
                label = node.name or (node.output[0] if node.output else "?")
                raise NvdlaSimError(f"{where}: node '{label}' ({node.op_type}): {key} "
                                    f"{v.reshape(-1).tolist()}: every value must be a number in "
                                    f"0..{top}")


def _static_shapes(model) -> dict[str, tuple[int, ...]]:
    """Fully known shapes of every tensor shape inference can type."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:            # inference refuses some valid graphs; folding then knows less
        inferred = model
    g = inferred.graph
    shapes = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if all(d is not None for d in dims):
            shapes[vi.name] = tuple(int(d) for d in dims)
    return shapes


def _shape_of(node, shape: tuple[int, ...]) -> np.ndarray:
    """The output of a Shape node (opset 15 start/end attributes included)."""
    import onnx
    a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
    start, end = a.get("start", 0), a.get("end", len(shape))
    return np.array(shape[slice(start, end)], np.int64)


def _evaluate(nodes, consts: dict[str, np.ndarray], opset: int, where: str) -> dict[str, np.ndarray]:
    """Run the constant-only `nodes` once with onnx's reference evaluator."""
    from onnx import TypeProto, helper
    from onnx.reference import ReferenceEvaluator
    needed = {i for n in nodes for i in n.input if i} - {o for n in nodes for o in n.output}
    outs = [o for n in nodes for o in n.output if o]
    needed = sorted(needed)
    graph = helper.make_graph(list(nodes), "fold",
                              [helper.make_value_info(i, TypeProto()) for i in needed],
                              [helper.make_value_info(o, TypeProto()) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        values = ReferenceEvaluator(model).run(None, {i: np.asarray(consts[i]) for i in needed})
    except Exception as exc:
        raise NvdlaSimError(f"{where}: constant folding with onnx's reference evaluator failed "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    return {o: np.asarray(v) for o, v in zip(outs, values)}


def normalize(model, where: str = "onnx model") -> Normalized:
    """A copy of `model` without its constant-only nodes, initializers and
    weight inputs, and the value of every constant tensor the remaining nodes read."""
    import onnx
    from onnx import helper, numpy_helper

    opset = check_versions(model, where)
    check_model(model, where)
    check_inference_bounds(model, where, opset)
    target = CONVERT_BELOW if opset < CONVERT_BELOW else MAX_OPSET if opset > MAX_OPSET else opset
    if target != opset:
        try:
            model = onnx.version_converter.convert_version(model, target)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise NvdlaSimError(f"{where}: opset {opset} (accepted: {MIN_OPSET} to {MAX_OPSET}); onnx's "
                                f"version converter cannot bring it to {target} "
                                f"({type(exc).__name__}: {first})") from None
        opset = target
    g = model.graph
    consts: dict[str, np.ndarray] = {t.name: _initializer(t, where) for t in g.initializer}
    shapes = _static_shapes(model)
    graph_outputs = {o.name for o in g.output}
    kept, folded = [], []
    known = set(consts)                  # constant tensors, decided before evaluating any
    for node in g.node:
        ins = [i for i in node.input if i]
        foldable = node.op_type not in _NOT_FOLDABLE \
            and not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                        for a in node.attribute)
        if node.op_type == "Shape" and ins and ins[0] in shapes and ins[0] not in known:
            consts[node.output[0]] = _shape_of(node, shapes[ins[0]])
            known.add(node.output[0])
        elif node.op_type == "Size" and ins and ins[0] in shapes and ins[0] not in known:
            consts[node.output[0]] = np.array(int(np.prod(shapes[ins[0]])), np.int64)
            known.add(node.output[0])
        elif foldable and all(i in known for i in ins) and not (set(node.output) & graph_outputs):
            folded.append(node)
            known.update(o for o in node.output if o)
        else:
            kept.append(node)
    if folded:
        consts.update(_evaluate(folded, consts, opset, where))
    used = {i for n in kept for i in n.input} | graph_outputs
    consts = {k: v for k, v in consts.items() if k in used}
    inputs = [i for i in g.input if i.name not in consts and i.name not in known]
    # The constants stay numpy arrays beside the graph (a VGG-19 weight is 400 MB: no protobuf copy).
    graph = helper.make_graph(kept, g.name or "onnx", inputs, list(g.output),
                              value_info=list(g.value_info))
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    out.ir_version = model.ir_version
    return Normalized(out, consts, shapes)
