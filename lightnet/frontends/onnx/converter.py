"""The converter: an ONNX graph to LightNet IR ops and weights.

It fixes the inputs' dims, folds constants (alternating with ONNX shape
inference; an If whose condition folds is replaced by the branch it takes,
inlining.py), fuses the subgraphs fusion.py recognises, maps every node the
outputs need through its handler (handlers/), collects the nodes it cannot
map, and binds the graph outputs to their ONNX names.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from lightnet.errors import LightNetError
from lightnet.ir.limits import FoldBudget

from . import handlers  # noqa: F401 - registers every handler
from .dispatch import attribute_arguments, find_handler, supported_versions, HANDLERS
from .dtypes import BFLOAT16, FLOAT, NP_OF_ONNX, NP_OF_TL, tl_dtype, to_tl_array
from .errors import GRAPH_INPUT, NotKnown, Poisoned, Unsupported, UnsupportedModelError
from .folding import FOLD_LIMIT, FOLD_ROUNDS, FOLDERS, fold_elements, fold_eye_like, fold_shape
from .fusion import fuse
from .graph import (Node, Schema, TensorTypes, Val, attribute_value, lnshape, node_problem,
                    onnx_package, pyval, tensor_array)
from .inlining import all_names, inline, outer_reads, subgraphs, taken_branch
from .qdq import fuse_qdq


def unique(hint: str, taken: set[str]) -> str:
    """`hint`, or `hint_1`, `hint_2`... the first not in `taken` (then taken)."""
    name, k = hint, 1
    while name in taken:
        name = f"{hint}_{k}"
        k += 1
    taken.add(name)
    return name


def uniform_value(array: np.ndarray):
    """The one value every element of `array` has, or None."""
    if array.size == 0:
        return None
    first = array.reshape(-1)[0] if array.flags.c_contiguous else array.flat[0]
    if all(s == 0 for s in array.strides) or (array.size <= 1 << 24 and np.all(array == first)):
        return first.item()
    return None


class Converter:
    """One conversion of one model: `run()` gives (IR, weights). Handlers read tensors
    (`val`, `const`) and append ops (`emit` and the helpers built on it)."""

    def __init__(self, model, dims: dict | None, shapes: dict | None = None,
                 fold_limit: int | None = None, unfolded=frozenset()):
        self.onnx = onnx_package()
        # What folding and the shape inference between its rounds may still touch; the
        # tensors it had no room to compute (or to give shape inference), and those
        # computed from them by nodes not folded (explain).
        self.fold_budget = FoldBudget(fold_limit)
        self.past_limit: set[str] = set()
        self.after_limit: set[str] = set()
        self.model = model
        self.dims = dict(dims or {})
        self.shapes = dict(shapes or {})  # whole input shapes, checked by api.dims_of_shapes
        self.opset = 1
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = imp.version
        self.graph = model.graph
        self.ops: list[dict] = []
        self.weights: dict[str, np.ndarray] = {}
        self.consts: dict[str, np.ndarray] = {}  # ONNX name -> value (folded or given)
        # Folded values by content: ONNX name -> the first name folded to an equal
        # value, and that value's key -> that name; a node of the same op, attributes
        # and (so named) inputs as one already folded -> its outputs' names. A
        # transformer's layers each compute the same index tables (BEiT's relative
        # position index: twelve copies of 5M elements of work); they fold once.
        self.same_value: dict[str, str] = {}
        self.value_names: dict[tuple, str] = {}
        self.folded_nodes: dict[tuple, tuple] = {}
        self.initializers: set[str] = set()
        self.vals: dict[str, Val] = {}  # ONNX name -> LightNet tensor
        self.materialized: dict[str, Val] = {}
        self.info = TensorTypes()  # ONNX name -> (elem type, shape)
        self.used_tensor_names: set[str] = set()
        self.op_names: set[str] = set()
        self.node_names: set[str] = set()  # the ONNX nodes' (inlined ones are given new ones)
        self.problems: list[tuple[str, int, str]] = []
        self.poisoned: set[str] = set()
        self.graph_output_names = {o.name for o in model.graph.output}
        self.schemas: dict[str, Schema | None] = {}  # op type -> its schema at the opset
        self.protos: dict[str, object] = {}  # LightNet optype -> its prototype (require)
        # Indices of nodes mapped to ops even when their inputs are constants: those whose
        # values change size with a symbolic dim (a Range to the sequence length), which
        # a weight could not hold for every value of the dim (api.dim_dependent).
        self.unfolded = frozenset(unfolded)
        # (length, room) of every slice: its length must not exceed the room its input
        # has from its start. A length that follows a symbolic dim, its room fixed (the
        # slice of a position table), bounds the dim (api.convert, symbolic.implied_bounds).
        self.limits: list[tuple[int, int]] = []

    # Names ---------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        return unique(hint or "t", self.used_tensor_names)

    def op_name(self, hint: str) -> str:
        return unique(hint or "op", self.op_names)

    # Graph preparation -----------------------------------------------------------

    def run(self):
        self._prepare()
        self._fold()
        self._fuse()
        self._map()
        self._finish()
        return {"ops": self.ops, "interface": self._interface()}, self.weights

    def folded_shapes(self) -> dict[int, tuple]:
        """{node index: the shapes of its outputs} of every node constant folding
        computes (nothing is mapped)."""
        self._prepare()
        self._fold()
        return {n.index: tuple(self.consts[o].shape if o in self.consts else None
                               for o in n.outputs)
                for n in self.nodes if n.index in self.folded}

    def _prepare(self):
        onnx = self.onnx
        g = self.graph
        for t in g.initializer:
            self.consts[t.name] = tensor_array(onnx, t, f"initializer '{t.name}'")
            self.initializers.add(t.name)
        for t in getattr(g, "sparse_initializer", []):
            raise LightNetError(f"sparse initializer '{t.values.name}' is not supported")
        self.used_tensor_names.update(self.consts)
        # The NodeProtos in a list: indexing the protobuf field makes a new object.
        self.node_protos = list(g.node)
        self.nodes = [self._node(i, n) for i, n in enumerate(self.node_protos)]
        # (The nodes' names read from the Node lists: each access to a protobuf field
        # makes a new Python object.)
        named, read = set(), set()
        for n in self.nodes:
            named.update(n.inputs, n.outputs)
            read.update(n.inputs, n.outer)
            self.node_names.add(n.name)
        named.discard("")  # (an input or output left out)
        read.discard("")
        self.used_tensor_names |= named
        self.consumed = read | self.graph_output_names
        self.inputs = [i for i in g.input if i.name not in self.consts]
        self.used_tensor_names.update(i.name for i in g.input)
        self.used_tensor_names.update(o.name for o in g.output)
        self._fix_inputs()

    def _schema(self, op_type: str) -> Schema | None:
        """The schema of `op_type` at the model's opset (None: ONNX has none)."""
        if op_type not in self.schemas:
            try:
                self.schemas[op_type] = Schema.of(
                    self.onnx.defs.get_schema(op_type, self.opset, ""))
            except Exception:  # noqa: BLE001 - onnx raises SchemaError, or TypeError
                self.schemas[op_type] = None
        return self.schemas[op_type]

    def _node(self, index, n) -> Node:
        """NodeProto `n` as a Node, each of its fields read once (every read of a
        protobuf field makes a new Python object). Its names and attributes are taken
        by slicing: iterating a repeated field ends in an IndexError, raised and
        caught, which costs more than reading what it holds."""
        domain, op_type = n.domain, n.op_type
        if domain == "ai.onnx":
            domain = ""
        schema = self._schema(op_type) if domain == "" else None
        version = 0 if schema is None else schema.version
        if domain:
            op_type = f"{domain}.{op_type}"
        attributes = n.attribute[:]
        node = Node(index, n.name, op_type, version, n.input[:], n.output[:])
        problem = None if schema is None else node_problem(
            self.onnx, schema, node.inputs, node.outputs, attributes)
        if problem is not None:
            raise LightNetError(f"node {node.label} ({op_type}-{version}): {problem}")
        if attributes:
            what = f"node {node.label} ({op_type}-{version})"
            node.attrs = {a.name: attribute_value(self.onnx, a, what) for a in attributes}
            graphs = subgraphs(attributes)
            if graphs:
                node.outer = tuple(sorted(set().union(*map(outer_reads, graphs))))
                # Fresh names avoid theirs too (a name inlined into a subgraph must not be
                # one it defines).
                self.used_tensor_names.update(*map(all_names, graphs))
        return node

    def _fix_inputs(self):
        errors = []
        self.input_shapes = {}
        for inp in self.inputs:
            t = inp.type.tensor_type
            if not inp.type.HasField("tensor_type"):
                errors.append(f"input '{inp.name}' is not a tensor")
                continue
            if not t.HasField("shape"):
                errors.append(f"input '{inp.name}' has no shape")
                continue
            shape = []
            given = self.shapes.get(inp.name)
            for axis, d in enumerate(t.shape.dim):
                if d.HasField("dim_value") and d.dim_value > 0:
                    shape.append(d.dim_value)
                elif d.HasField("dim_value"):
                    errors.append(f"input '{inp.name}' dim {axis} is 0 "
                                  "(empty tensors are not supported)")
                elif given is not None:
                    shape.append(int(given[axis]))
                elif d.HasField("dim_param") and d.dim_param in self.dims:
                    shape.append(int(self.dims[d.dim_param]))
                elif axis == 0:
                    shape.append(1)
                else:
                    label = f"'{d.dim_param}'" if d.dim_param else "unnamed"
                    errors.append(f"input '{inp.name}' dim {axis} is symbolic ({label}): "
                                  f"give its shape, --shape {inp.name}=D1,D2,...")
            self.input_shapes[inp.name] = tuple(shape)
            self.info[inp.name] = (t.elem_type, tuple(shape))
        named = {d.dim_param for i in self.inputs if i.type.HasField("tensor_type")
                 for d in i.type.tensor_type.shape.dim if d.dim_param}
        for name in sorted(set(self.dims) - named):
            errors.append(f"--dim {name}: no input dim is named '{name}' (symbolic dims: "
                          f"{', '.join(sorted(named)) or 'none'})")
        if errors:
            raise LightNetError("; ".join(errors))

    def _infer(self, nodes):
        """ONNX shape inference over the unfolded nodes, constants given as initializers
        (small ones, which shape computations read, while the fold limit lasts) or
        typed inputs (weights). Its model is made now; it runs when the importer first
        reads a type (self.info), which a chain of unary ops never does."""
        onnx = self.onnx
        helper = onnx.helper
        inputs = [helper.make_tensor_value_info(i.name, i.type.tensor_type.elem_type,
                                                self.input_shapes[i.name]) for i in self.inputs]
        inits = []
        needed = {x for n in nodes for x in (*n.inputs, *n.outer) if x in self.consts}
        for name in sorted(needed):
            value = self.consts[name]
            # Integers may be shapes or indices; 8-bit ones are a quantized model's
            # weights, which no shape reads: they would spend the fold limit.
            shape_like = value.dtype.kind == "b" or (value.dtype.kind in "iu"
                                                     and value.dtype.itemsize > 1)
            if (value.size <= 4096 or shape_like) and self.take(value.size, [name]):
                try:
                    inits.append(onnx.numpy_helper.from_array(value, name))
                    continue
                except Exception:
                    pass
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
        outputs = [helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, None)
                   for o in self.graph.output]
        protos = [self.node_protos[n.index] for n in nodes]
        opsets, ir_version = list(self.model.opset_import), max(self.model.ir_version, 4)

        # Not a closure over self: self.info keeps the round, and the converter it would
        # hold would live on (a cycle) until the collector, paused while a model is
        # built (gc_pause), runs again.
        def infer():
            model = helper.make_model(helper.make_graph([], "g", inputs, outputs, inits),
                                      opset_imports=opsets)
            # The nodes copied once (make_model copies the graph make_graph made).
            model.graph.node.extend(protos)
            model.ir_version = ir_version
            try:
                # No data propagation: it computes the values of shape tensors in C++
                # with no bound (an Expand to the shape of a [2**31 - 1] input took
                # 20 GB); the folding between rounds computes them, within the fold limit.
                inferred = onnx.shape_inference.infer_shapes(model, check_type=False,
                                                             strict_mode=False)
            except Exception:
                inferred = model
            return (*inferred.graph.value_info, *inferred.graph.output)

        self.info.infer_later(infer)

    def _fold(self):
        self.folded = set()
        live = self._live()
        self.rounds_ran_out = False
        for _ in range(FOLD_ROUNDS):  # (see FOLD_ROUNDS)
            changed = self._inline(live)
            if changed:
                live = self._live()
            pending = [n for n in self.nodes if n.index not in self.folded and n.index in live]
            self._infer(pending)
            for n in pending:
                if self._try_fold(n):
                    self.folded.add(n.index)
                    changed = True
            if not changed:
                return
        self.rounds_ran_out = True

    def _inline(self, live: set[int]) -> bool:
        """Replace every live If whose condition is now a constant by the nodes of the
        branch it takes (inlining.py; an If among them whose condition is a constant
        already, too); whether there was one."""
        inlined, k = False, 0
        while k < len(self.nodes):
            n = self.nodes[k]
            if n.op_type != "If" or n.index not in live or n.input(0) not in self.consts:
                k += 1
                continue
            protos, initializers = inline(
                self.onnx, n, taken_branch(n, self.consts[n.input(0)]), self.fresh,
                lambda hint: unique(hint, self.node_names))
            for t in initializers:
                self.consts[t.name] = tensor_array(self.onnx, t, f"initializer '{t.name}'")
                self.initializers.add(t.name)
            first = len(self.node_protos)
            nodes = [self._node(first + i, p) for i, p in enumerate(protos)]
            self.node_protos.extend(protos)
            self.nodes[k:k + 1] = nodes  # (k: the first of them, looked at next)
            live.update(m.index for m in nodes)
            self.consumed.update(x for m in nodes for x in (*m.inputs, *m.outer) if x)
            inlined = True
        return inlined

    def _live(self) -> set[int]:
        """The indices of the nodes the graph's outputs depend on: only those fold (a
        dead constant subgraph would spend the fold limit)."""
        producers = {o: n for n in self.nodes for o in n.outputs if o}
        live, stack = set(), [o.name for o in self.graph.output]
        while stack:
            n = producers.get(stack.pop())
            if n is not None and n.index not in live:
                live.add(n.index)
                stack.extend(self._read_inputs(n))
        return live

    def _read_inputs(self, n: Node) -> list[str]:
        """The inputs `n`'s results depend on, and the values its subgraphs read (an
        If's branches); a BatchNormalization in training mode whose running mean and
        variance are not read does not read its mean and var (torch writes ReduceMeans
        of a weight-standardized convolution's weight for them, BiT's, whose own
        statistics normalize it)."""
        if (n.op_type == "BatchNormalization" and n.attrs.get("training_mode")
                and not any(self.used(n, i) for i in (1, 2))):
            return n.inputs[:3]
        return [*n.inputs, *n.outer] if n.outer else n.inputs

    def _fuse(self):
        """Replace the written-out GELU, SiLU, hard swish and layer normalization
        subgraphs among the nodes left to map by one node each (fusion.py), then a QDQ
        model's quantized convolutions and products (qdq.py)."""
        def rank_of(name):
            info = self.info.get(name)
            return None if info is None or info[1] is None else len(info[1])

        def add_const(hint, value, like):
            elem = self.info.get(like, (FLOAT, None))[0]
            name = self.fresh(hint)
            self._set_const(name, np.array([value], NP_OF_ONNX.get(elem, np.float32)))
            return name

        pending = [n for n in self.nodes if n.index not in self.folded]
        fused = fuse(pending, self.consts, self.graph_output_names, rank_of, add_const)
        self.nodes = [n for n in self.nodes if n.index in self.folded] + fuse_qdq(
            fused, self.consts, self.graph_output_names,
            lambda name: self.info.get(name, (0, None))[1])
        for n in self.nodes:
            if (n.op_type == "DequantizeLinear" and n.index not in self.folded
                    and self._fold_dequantized_constant(n)):
                self.folded.add(n.index)

    def _fold_dequantized_constant(self, n: Node) -> bool:
        """Whether DequantizeLinear `n` is one of constants no quantized operator took (a
        QDQ model's LayerNormalization scale, a bias a float op adds), now its float32
        value (x - zero point) * scale, as a float model's weight: the float op reads a
        constant (layernorm's dnnl variant needs one) and no dequantize runs each time."""
        if (n.outputs[0] in self.graph_output_names or n.attrs.get("block_size")
                or n.attrs.get("output_dtype") or not all(x in self.consts for x in n.inputs if x)):
            return False
        x, scale = self.consts[n.input(0)], self.consts[n.input(1)]
        if (x.dtype.kind not in "iu" or x.dtype.itemsize > 4 or scale.dtype != np.float32
                or x.size > FOLD_LIMIT or not self.take(x.size, n.outputs)):
            return False
        view = [1] * x.ndim
        if scale.size != 1:
            if scale.ndim != 1 or not x.ndim:
                return False
            view[n.attrs.get("axis", 1) % x.ndim] = scale.size
        zero = self.consts[n.input(2)] if n.has_input(2) else np.zeros((), x.dtype)
        value = np.subtract(x, np.reshape(zero, view if zero.size != 1 else ()),
                            dtype=np.float32)
        self._set_const(n.outputs[0], np.multiply(value, np.reshape(
            scale, view if scale.size != 1 else ()), dtype=np.float32))
        return True

    def _try_fold(self, n: Node) -> bool:
        if n.op_type in ("Shape", "Size", "EyeLike"):  # of the input's shape alone
            info = self.info.get(n.input(0))
            shape, elem = (info[1], info[0]) if info else (None, 0)
            if n.input(0) in self.consts:
                shape = self.consts[n.input(0)].shape
                elem = self.onnx.helper.np_dtype_to_tensor_dtype(self.consts[n.input(0)].dtype)
            if shape is None:
                return False
            if n.op_type == "Size":
                value = np.array(math.prod(shape), np.int64)
            elif n.op_type == "EyeLike":
                if math.prod(shape) > FOLD_LIMIT or not self.take(math.prod(shape), n.outputs):
                    return False
                try:
                    value = fold_eye_like(shape, elem, **attribute_arguments(fold_eye_like, n))
                except (Unsupported, LightNetError):
                    return False
            else:
                try:
                    value = fold_shape(shape, **attribute_arguments(fold_shape, n))
                except (Unsupported, LightNetError):
                    return False
            self._set_const(n.outputs[0], value)
            return True
        folder = FOLDERS.get(n.op_type)
        if folder is None or n.index in self.unfolded:
            return False
        if n.op_type == "Dropout" and len(n.outputs) > 1 and n.outputs[1] in self.consumed:
            return False
        read = self._read_inputs(n)
        if not all(x in self.consts for x in read if x):
            return False
        key = self._node_key(n)
        if key in self.folded_nodes:
            for name, same in zip(n.outputs, self.folded_nodes[key]):
                if name and same:
                    self._set_const(name, self.consts[same], same)
            return True
        ins = [self.consts[x] if x and x in read else None for x in n.inputs]
        touched, result = fold_elements(n, ins)
        if result > FOLD_LIMIT or not self.take(touched, n.outputs):
            return False  # left to the runtime
        try:
            with np.errstate(all="ignore"):
                outs = folder(n, ins, **attribute_arguments(folder, n))
        except Exception:  # noqa: BLE001 - not folded: the handler reports what is wrong
            return False
        for name, value in zip(n.outputs, outs):
            if name:
                self._set_const(name, np.asarray(value))
        if key is not None and all(not o or o in self.same_value for o in n.outputs):
            self.folded_nodes[key] = tuple(o and self.same_value[o] for o in n.outputs)
        return True

    def take(self, elements: int, names) -> bool:
        """Spend `elements` of the fold limit computing tensors `names`; False, and those
        noted as past the limit, when it has not that many left."""
        if self.fold_budget.take(elements):
            return True
        self.past_limit.update(x for x in names if x)
        return False

    def _node_key(self, n: Node) -> tuple | None:
        """What folding `n` depends on: its op, version, attributes and inputs (by the
        name of the first equal value folded); None when an input is not such a value
        (a weight) or an attribute is a tensor."""
        if not n.inputs or any(x and x not in self.same_value for x in n.inputs):
            return None
        if any(isinstance(v, np.ndarray) for v in n.attrs.values()):
            return None
        return (n.op_type, n.version, repr(sorted(n.attrs.items())),
                tuple(x and self.same_value[x] for x in n.inputs))

    def _value_key(self, value: np.ndarray) -> tuple | None:
        """dtype, shape and a digest of the elements of a folded value (one element of
        a broadcast one, ConstantOfShape's); None for one too large to read again."""
        if value.size and not any(value.strides):
            data = np.ascontiguousarray(value.reshape(-1)[:1])
        elif value.size <= FOLD_LIMIT:
            data = np.ascontiguousarray(value)
        else:
            return None
        try:
            digest = hashlib.blake2b(data.view(np.uint8).reshape(-1), digest_size=16)
        except (TypeError, ValueError):  # an object array (strings)
            return None
        return value.dtype.str, value.shape, digest.digest()

    def _set_const(self, name, value, same: str | None = None):
        """Constant `name` is `value` (the value of constant `same`, when known)."""
        self.consts[name] = value
        key = None if same else self._value_key(value)
        if same or key is not None:
            self.same_value[name] = same or self.value_names.setdefault(key, name)
        try:
            elem = self.onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        except Exception:
            elem = 0
        self.info[name] = (elem, tuple(value.shape))

    # Mapping ---------------------------------------------------------------------

    def _map(self):
        # Graph inputs become input ops.
        for inp in self.inputs:
            elem = inp.type.tensor_type.elem_type
            shape = self.input_shapes[inp.name]
            try:
                if elem == BFLOAT16:  # numpy has no bfloat16: Session could not take it
                    raise Unsupported(f"'{inp.name}' is a bfloat16 input, which Session "
                                      "cannot take (numpy has no bfloat16)")
                dtype = tl_dtype(elem, f"'{inp.name}'")
            except Unsupported as e:
                self.problems.append((GRAPH_INPUT, 0, str(e)))
                self.poisoned.add(inp.name)
                continue
            self.emit("input", {}, {"dtype": dtype, "dims": list(lnshape(shape))},
                      dtype, shape, out=inp.name, hint=inp.name)
        # Only the nodes the outputs need, and only those not folded.
        producers = {}
        for n in self.nodes:
            for o in n.outputs:
                if o:
                    producers[o] = n
        needed, stack = set(), [o.name for o in self.graph.output]
        seen = set()
        while stack:
            t = stack.pop()
            if not t or t in seen or t in self.consts:  # ("": an input left out)
                continue
            seen.add(t)
            n = producers.get(t)
            if n is None or n.index in needed:
                continue
            needed.add(n.index)
            stack.extend(x for x in n.inputs if not (n.op_type == "Concat" and self.is_empty(x)))
            stack.extend(n.outer)
        mapped = [n for n in self.nodes if n.index not in self.folded and n.index in needed]
        self.after_limit = set(self.past_limit)
        for n in mapped if self.past_limit else ():  # (in the graph's order)
            if any(x in self.after_limit for x in n.inputs):
                self.after_limit.update(x for x in n.outputs if x)
        for n in mapped:
            self._map_node(n)
        if self.problems:
            raise UnsupportedModelError(self.problems, self.opset)

    def _map_node(self, n: Node):
        func = find_handler(n.op_type, n.version)
        problem = None
        if n.op_type not in HANDLERS:
            problem = ""
        elif func is None:
            problem = (f"version {n.version} is not supported "
                       f"(supported: {', '.join(map(str, supported_versions(n.op_type)))})")
        else:
            try:
                func(self, n, **attribute_arguments(func, n))
            except Unsupported as e:
                problem = self.explain(n, e)
            except Poisoned:
                problem = None
                self._poison(n)
                return
            except LightNetError:
                raise
            except Exception as e:  # noqa: BLE001 - a mapping that fails on odd input
                if any(x in self.poisoned for x in n.inputs):
                    self._poison(n)
                    return
                if isinstance(e, ValueError):  # a shape rule's check: its message says
                    raise LightNetError(f"node {n.label} ({n.op_type}): {e} (an invalid "
                                        "ONNX model)") from e
                raise LightNetError(f"node {n.label} ({n.op_type}): cannot be "
                                    f"imported: {type(e).__name__}: {e}") from e
        if problem is not None:
            self.problems.append((n.op_type, n.version, problem))
            self._poison(n)

    def explain(self, n: Node, e: Unsupported) -> str:
        """Why `n` cannot be mapped (`e`), saying that the fold limit ran out when that
        may be the cause: `n` was left to the run for want of it (folded, it would
        need no mapping), or a shape or value `n` needs is not known and `n` reads
        what the limit left uncomputed (through nodes not folded)."""
        if any(x in self.past_limit for x in n.outputs) or (
                isinstance(e, NotKnown) and any(x in self.after_limit for x in n.inputs)):
            return self.fold_budget.explain(str(e))
        if isinstance(e, NotKnown) and self.rounds_ran_out:
            return (f"{e}: constant folding stopped after {FOLD_ROUNDS} rounds of shape "
                    "inference, before it could be computed")
        return str(e)

    def _poison(self, n: Node):
        for o in n.outputs:
            if o:
                self.poisoned.add(o)

    # Values ------------------------------------------------------------------------

    def used(self, n: Node, i: int) -> bool:
        """Output `i` of `n` is read by a node or is a graph output."""
        name = n.outputs[i] if i < len(n.outputs) else ""
        return bool(name) and name in self.consumed

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def is_empty(self, name: str) -> bool:
        """Whether tensor `name` is known to have no elements (a dim of 0): a Concat
        leaves it out (torch.roll by 0 exports a Slice of nothing and a Concat)."""
        shape = self.consts[name].shape if name in self.consts else (
            self.info.get(name) or (0, None))[1]
        return shape is not None and 0 in shape

    def const(self, name: str, what: str = "") -> np.ndarray:
        """The constant value of ONNX tensor `name`; unsupported if it is computed."""
        if name not in self.consts:
            raise NotKnown(f"{what or 'input'} '{name}' must be a constant")
        return self.consts[name]

    def val(self, name: str) -> Val:
        """ONNX tensor `name` as a LightNet tensor (constants become create ops)."""
        if name in self.poisoned:
            raise Poisoned()
        if name in self.vals:
            return self.vals[name]
        if name in self.consts:
            return self.materialize(name)
        raise LightNetError(f"tensor '{name}' is read before any node computes it")

    def materialize(self, name: str, out: str | None = None) -> Val:
        if name in self.materialized and out is None:
            return self.materialized[name]
        value = self.consts[name]
        if value.size == 0:
            raise Unsupported(f"constant '{name}' is empty (shape {list(value.shape)})")
        if value.dtype == object:  # a string tensor (numpy_helper gives its bytes objects)
            raise Unsupported(f"constant '{name}' of strings")
        what = f"{'initializer' if name in self.initializers else 'constant'} '{name}'"
        uniform = uniform_value(value) if name not in self.initializers else None
        array = (to_tl_array(np.asarray(uniform, value.dtype).reshape(1), what)
                 if uniform is not None else to_tl_array(value, what))
        if uniform is not None:  # its shape, however many elements ([1, 1] too)
            array = np.broadcast_to(array.reshape(()), value.shape)
        dtype = tl_dtype(self.onnx.helper.np_dtype_to_tensor_dtype(value.dtype), what)
        target = out or (name if name not in self.vals else self.fresh(name))
        self.used_tensor_names.add(target)
        shape = tuple(value.shape)
        params = self._create_params(array, dtype, target, from_file=name in self.initializers)
        v = self.emit("create", {}, params, dtype, shape, out=target, hint=name, bind=False)
        if out is None:
            self.materialized[name] = v
        return v

    def scalar(self, value, dtype: str, hint: str) -> Val:
        """A [1] constant of `dtype` (for elew with a number)."""
        name = self.fresh(hint)
        params = {"dtype": dtype, "dims": [1]}
        if value:
            params["data"] = [pyval(value)]
        return self.emit("create", {}, params, dtype, (), out=name, hint=hint, bind=False)

    def tensor_const(self, array: np.ndarray, dtype: str, hint: str) -> Val:
        """A constant made by the importer (a zero bias, say)."""
        name = self.fresh(hint)
        array = np.asarray(array, dtype=NP_OF_TL[dtype])
        params = self._create_params(array, dtype, name)
        return self.emit("create", {}, params, dtype, array.shape, out=name, hint=hint, bind=False)

    def zeros(self, shape, dtype: str, hint: str) -> Val:
        """A constant of zeros made by the importer (a missing bias, say): a create
        op with no data, however large the shape."""
        return self.tensor_const(np.broadcast_to(np.zeros((), NP_OF_TL[dtype]), tuple(shape)),
                                 dtype, hint)

    def _create_params(self, array: np.ndarray, dtype: str, name: str, from_file=False) -> dict:
        """Params of the create op of constant `array`: from the weight file (always for
        initializers), or with its `data` (small ones), or a uniform value as ran
        [v, v] (zeros need nothing)."""
        params = {"dtype": dtype, "dims": list(lnshape(array.shape))}
        uniform = None if from_file or array.dtype == np.bool_ else uniform_value(array)
        # A uniform array may be a broadcast view of any size: its one value is checked.
        finite = array.dtype.kind != "f" or bool(np.isfinite(
            array if uniform is None else uniform).all())
        if from_file or not finite:
            pass
        elif uniform is not None and array.size > 1:
            if uniform:
                params["ran"] = [uniform, uniform]
            return params
        elif array.size <= 16:
            if array.any():
                params["data"] = [int(v) if isinstance(v, bool) else v
                                  for v in array.reshape(-1).tolist()]
            return params
        params["from_file"] = True
        self.weights[name] = np.ascontiguousarray(array).reshape(lnshape(array.shape))
        return params

    def known_shape(self, n: Node, i: int = 0) -> tuple[int, ...] | None:
        """The shape ONNX's inference gave output `i` of `n`; None when it gave none (an
        operator it does not know, or one after such)."""
        return self.info.get(n.outputs[i], (0, None))[1]

    def out_shape(self, n: Node, i: int = 0) -> tuple[int, ...]:
        shape = self.known_shape(n, i)
        if shape is None:
            raise NotKnown(f"the shape of output '{n.outputs[i]}' is unknown")
        return shape

    # Emitting ----------------------------------------------------------------------

    def require(self, optype: str):
        proto = self.protos.get(optype)
        if proto is None:
            from lightnet.archs.registry import get_proto

            proto = get_proto(optype)
            if proto is None:
                raise Unsupported(f"needs LightNet op '{optype}', which this build lacks")
            self.protos[optype] = proto
        return proto

    def has_param(self, optype: str, param: str) -> bool:
        return any(p.arg_name == param for p in self.require(optype).params)

    def emit(self, optype: str, ins: dict, params: dict, dtype: str, shape, *,
             out: str | None = None, hint: str = "", bind: bool = True) -> Val:
        """Append an op; its output is ONNX tensor `out` when given (bound to it)."""
        self.require(optype)
        name = out if out is not None else self.fresh(hint or optype)
        self.used_tensor_names.add(name)
        tensors_in = []
        for arg, v in ins.items():
            if v is None:
                continue
            if isinstance(v, list):
                tensors_in.extend({"arg_name": f"{arg}{k + 1}", "name": x.name}
                                  for k, x in enumerate(v))
            else:
                tensors_in.append({"arg_name": arg, "name": v.name})
        self.ops.append({
            "name": self.op_name(hint or name),
            "optype": optype,
            "tensors_in": tensors_in,
            "tensors_out": [{"arg_name": "dst", "name": name}],
            "params": [{"arg_name": k, "value": pyval(v)} for k, v in params.items()]
            if params else [],
        })
        v = Val(name, dtype, tuple(map(int, shape)))
        if out is not None and bind:
            self.vals[out] = v
        return v

    def emit_outputs(self, optype: str, ins: dict, params: dict, outs: dict, *,
                     hint: str = "") -> dict[str, Val]:
        """Append an op of several outputs (TopK's values and indices): `outs` maps each
        output arg to (dtype, shape, the ONNX tensor it is or None); returns their Vals."""
        first = next(iter(outs))
        ops_before = len(self.ops)
        dtype, shape, onnx_name = outs[first]
        vals = {first: self.emit(optype, ins, params, dtype, shape, out=onnx_name or None,
                                 hint=hint)}
        op = self.ops[ops_before]
        for arg, (dtype, shape, onnx_name) in list(outs.items())[1:]:
            name = onnx_name or self.fresh(f"{hint}_{arg}")
            self.used_tensor_names.add(name)
            op["tensors_out"].append({"arg_name": arg, "name": name})
            vals[arg] = Val(name, dtype, tuple(int(d) for d in shape))
            if onnx_name:
                self.vals[onnx_name] = vals[arg]
        op["tensors_out"][0]["arg_name"] = first
        return vals

    def bind(self, onnx_name: str, v: Val):
        """ONNX tensor `onnx_name` is LightNet tensor `v` (no op needed)."""
        self.vals[onnx_name] = v

    def result(self, n: Node, v: Val, i: int = 0):
        self.bind(n.outputs[i], v)

    def reshape(self, x: Val, shape, *, out: str | None = None, hint: str = "") -> Val:
        shape = tuple(int(d) for d in shape)
        if out is None and lnshape(shape) == lnshape(x.shape):
            return Val(x.name, x.dtype, shape)
        return self.emit("reshape", {"src": x}, {"dims": list(lnshape(shape))}, x.dtype, shape,
                         out=out, hint=hint or f"{x.name}_reshape")

    def reshape_output(self, n: Node, x: Val, shape):
        """Output 0 of `n` is `x` reshaped to `shape` (`x` itself when the shapes agree)."""
        if tuple(shape) == x.shape:
            self.result(n, Val(x.name, x.dtype, tuple(shape)))
            return
        if any(d <= 0 for d in shape):
            raise Unsupported(f"empty result shape {list(shape)}")
        self.reshape(x, shape, out=n.outputs[0], hint=n.name or n.outputs[0])

    def limit(self, length: int, room: int) -> None:
        """Note that `length` (which may follow a symbolic dim) is at most `room`."""
        self.limits.append((length, room))

    def slice(self, x: Val, axis: int, start: int, length: int, hint: str,
              out: str | None = None) -> Val:
        """`length` elements of `x` from `start` along `axis` (`x` itself when that is all)."""
        shape = x.shape[:axis] + (length,) + x.shape[axis + 1:]
        if length == x.shape[axis] and out is None:
            return x
        return self.emit("slice", {"src": x}, {"axis": axis, "start": start, "len": length},
                         x.dtype, shape, out=out, hint=hint)

    # Finishing -----------------------------------------------------------------------

    def _finish(self):
        # The ops reading each graph output (one that is also read inside the graph is
        # renamed, and a forward op writes it).
        readers: dict[str, list[dict]] = {o.name: [] for o in self.graph.output}
        for op in self.ops:
            for t in op["tensors_in"]:
                if t["name"] in readers:
                    readers[t["name"]].append(op)
        for o in self.graph.output:
            name = o.name
            if name in self.vals:
                v = self.vals[name]
            elif name in self.materialized:
                v = self.materialized[name]
            elif name in self.consts:
                try:
                    self.materialize(name)
                except Unsupported as e:
                    raise UnsupportedModelError([("graph output", 0, str(e))], self.opset) from None
                continue
            else:
                raise LightNetError(f"graph output '{name}' is not computed by any node")
            if v.name == name and not readers[name]:
                continue
            if v.name == name:
                producer = next(op for op in self.ops
                                if any(t["name"] == name for t in op["tensors_out"]))
                if producer["optype"] == "input":
                    continue  # an input that is also an output: it stays an input
                inner = self.fresh(f"{name}_inner")
                for t in producer["tensors_out"]:
                    if t["name"] == name:
                        t["name"] = inner
                for op in readers[name]:
                    for t in op["tensors_in"]:
                        if t["name"] == name:
                            t["name"] = inner
                if name in self.weights:
                    self.weights[inner] = self.weights.pop(name)
                v = Val(inner, v.dtype, v.shape)
            self.emit("forward", {"src": v}, {}, v.dtype, v.shape, out=name, hint=name)
            readers.setdefault(v.name, []).append(self.ops[-1])
        # Inputs, then every constant, then the computation in node order.
        inputs, creates, rest = [], [], []
        ranked = {"input": inputs, "create": creates}
        for op in self.ops:
            ranked.get(op["optype"], rest).append(op)
        self.ops = inputs + creates + rest

    def _interface(self) -> dict:
        """The dtype and shape ONNX declares for every graph input and output (those
        numpy has a dtype for), which Session takes and returns."""
        def port(name, elem_type, shape):
            return {"name": name, "dtype": np.dtype(NP_OF_ONNX[elem_type]).name,
                    "shape": [int(d) for d in shape]}

        inputs = [port(i.name, i.type.tensor_type.elem_type, self.input_shapes[i.name])
                  for i in self.inputs if i.type.tensor_type.elem_type in NP_OF_ONNX]
        outputs = []
        for o in self.graph.output:
            v = self.vals.get(o.name) or self.materialized.get(o.name)
            elem = o.type.tensor_type.elem_type or self.info.get(o.name, (0, None))[0]
            if v is not None and elem in NP_OF_ONNX:
                outputs.append(port(o.name, elem, v.shape))
        return {"inputs": inputs, "outputs": outputs}

    def check(self, ir):
        """Run LightNet's checks on the IR, and compare its shapes with ONNX's."""
        from lightnet.runtime.context import Context

        ctx = Context()
        try:
            ctx.init(ir)
        except LightNetError as e:
            raise LightNetError(f"the imported model fails LightNet's checks (an invalid "
                                f"ONNX model, or an importer bug): {e}") from None
        for onnx_name, v in self.vals.items():
            entry = ctx.tensors.get(v.name) if v.name in ctx.tensors else None
            info = self.info.get(onnx_name)
            if entry is None or info is None or info[1] is None:
                continue
            if tuple(entry.shape) != lnshape(info[1]):
                raise LightNetError(
                    f"importer bug: tensor '{onnx_name}' has shape {list(entry.shape)} in "
                    f"LightNet but {list(info[1])} in ONNX")
        ctx.cleanup()
