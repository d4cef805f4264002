"""The data-flow graph of a model: ops as nodes, tensor names as edges.

Tensors consumed but produced by no op are dangling ins; tensors produced but
consumed by no op are dangling outs (the model's outputs). Passes ask it who
consumes an op's output and who produced an op's input.
"""

from __future__ import annotations

from lightnet.errors import LightNetError
from lightnet.ir.digraph import CycleError, Graph
from lightnet.ir.op import Op


class DataFlowGraph:
    def __init__(self, ops=()):
        self.graph = Graph()
        self.ops: dict[str, Op] = {}
        self.producer: dict[str, str] = {}  # tensor -> op name
        self.consumers: dict[str, list[str]] = {}  # tensor -> op names, in add order
        # op name -> the tensors it read and wrote when it was added (a pass may rename
        # them in the op before the graph is told: see update)
        self.names: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        for op in ops:
            self.add(op)

    def add(self, op: Op) -> None:
        """Add `op` and link it with the ops producing its inputs and consuming its outputs."""
        if op.name in self.ops:
            raise LightNetError(f"op name '{op.name}' is used twice")
        # Check every output before changing anything, so a failed add leaves
        # the graph as it was.
        produced = {}
        for tname in op.tensors_out.values():
            other = self.producer.get(tname) or produced.get(tname)
            if other is not None:
                raise LightNetError(
                    f"tensor '{tname}' is produced by both op '{other}' and op '{op.name}'"
                )
            produced[tname] = op.name
        name, producer, consumers = op.name, self.producer, self.consumers
        self.ops[name] = op
        ins = tuple(op.tensors_in.values())
        self.names[name] = (ins, tuple(produced))
        # The graph's edges linked here, as rebuild does (every op is a node of it).
        succ, pred = self.graph._succ, self.graph._pred
        if name not in succ:
            succ[name], pred[name] = [], []
        for tname in ins:
            readers = consumers.get(tname)
            if readers is None:
                consumers[tname] = [name]
            else:
                readers.append(name)
            made_by = producer.get(tname)
            if made_by is not None:
                succ[made_by].append((name, tname))
                pred[name].append((made_by, tname))
        for tname in produced:
            producer[tname] = name
            for consumer in consumers.get(tname, ()):
                succ[name].append((consumer, tname))
                pred[consumer].append((name, tname))

    def remove(self, op: Op) -> None:
        """Remove `op` and its edges (those of the tensors it had when it was added); its
        inputs and outputs may become dangling."""
        del self.ops[op.name]
        ins, outs = self.names.pop(op.name)
        self.graph.remove(op.name)
        for tname in ins:
            self.consumers[tname].remove(op.name)
            if not self.consumers[tname]:
                del self.consumers[tname]
        for tname in outs:
            del self.producer[tname]

    def clear(self) -> None:
        """Remove every op (what removing each one leaves: an empty graph)."""
        self.graph = Graph()
        self.ops, self.producer, self.consumers, self.names = {}, {}, {}, {}

    def rebuild(self, ops) -> None:
        """The graph of `ops` anew: what clear() and add(op) for each would make, in
        one loop (Context.rewrite makes it of every op of a model)."""
        self.clear()
        graph = self.graph
        graph_succ, graph_pred = graph._succ, graph._pred
        every, producer, consumers, names = self.ops, self.producer, self.consumers, self.names
        for op in ops:
            name = op.name
            outs = tuple(op.tensors_out.values())
            if (name in every or any(t in producer for t in outs)
                    or len(set(outs)) != len(outs)):
                self.add(op)  # raises, as adding it would
                continue
            every[name] = op
            ins = tuple(op.tensors_in.values())
            names[name] = (ins, outs)
            if name not in graph_succ:
                graph_succ[name], graph_pred[name] = [], []
            pred = graph_pred[name]
            for tname in ins:
                readers = consumers.get(tname)
                if readers is None:
                    consumers[tname] = [name]
                else:
                    readers.append(name)
                made_by = producer.get(tname)
                if made_by is not None:
                    graph_succ[made_by].append((name, tname))
                    pred.append((made_by, tname))
            for tname in outs:
                producer[tname] = name
                if tname in consumers:  # read before it is made (check() refuses it)
                    for consumer in consumers[tname]:
                        graph.link(name, consumer, tname)

    def update(self, position: dict[str, int], gone, suspects) -> None:
        """Make the graph that of the op list `position` orders (each op's index in it,
        by name; every op reads tensors made before it), told what changed: `gone`, the
        ops taken out of it; `suspects`, the ops that may be new or read or write other
        tensors than when they were added (Context.rewrite: a pass inserting a few
        reorders into a large model). Only those are taken out and added, and the lists
        an op added was appended to put back in the order rebuild gives them (a
        tensor's readers in op order, each op's edges in the order of its args); the
        dicts are left in no particular order (ops added go last)."""
        every, names = self.ops, self.names
        moved = []  # the ops to take out (if in the graph) and add
        for op in suspects:
            name = op.name
            was = names.get(name)
            if (was is None or every[name] is not op
                    or was[0] != tuple(op.tensors_in.values())
                    or was[1] != tuple(op.tensors_out.values())):
                moved.append(op)
        for op in gone:
            self.remove(op)
        for op in moved:
            if op.name in every:
                self.remove(every[op.name])
        for op in moved:
            self.add(op)
        producer, consumers, graph = self.producer, self.consumers, self.graph
        at = position.__getitem__
        # Only the lists an added op was appended to may be out of order: the readers
        # of what it reads, the edges into it and into its readers, and those out of
        # it and out of its producers.
        read = {t for op in moved for t in op.tensors_in.values()}
        made = [t for op in moved for t in op.tensors_out.values()]
        for t in read:
            readers = consumers[t]
            if len(readers) > 1:
                readers.sort(key=at)
        into = {n: graph._pred[n] for n in [
            *(op.name for op in moved), *(r for t in made for r in consumers.get(t, ()))]}
        out_of = {n: graph._succ[n] for n in [
            *(op.name for op in moved), *(producer[t] for t in read if t in producer)]}
        for name, edges in into.items():
            if len(edges) > 1:
                edges[:] = [(producer[t], t) for t in every[name].tensors_in.values()
                            if t in producer]
        for name, edges in out_of.items():
            if len(edges) > 1:
                readers = sorted({reader for reader, _ in edges}, key=at)
                edges[:] = [(reader, t) for reader in readers
                            for t in every[reader].tensors_in.values()
                            if producer.get(t) == name]

    def link(self, op1: Op, op2: Op, tname: str) -> None:
        self.graph.link(op1.name, op2.name, tname)

    def unlink(self, op1: Op, op2: Op, tname: str) -> None:
        self.graph.unlink(op1.name, op2.name, tname)

    def nexts(self, op: Op, tname: str) -> list[Op]:
        """The ops consuming `tname`, an output of `op`."""
        if tname not in op.tensors_out.values():
            return []
        return [self.ops[n] for n in self.consumers.get(tname, ())]

    def prev(self, op: Op, tname: str) -> Op | None:
        """The op producing `tname`, an input of `op`."""
        if tname not in op.tensors_in.values() or tname not in self.producer:
            return None
        return self.ops[self.producer[tname]]

    def num_consumers(self, tname: str) -> int:
        return len(self.consumers.get(tname, ()))

    @property
    def dangling_ins(self) -> list[str]:
        """The tensors read and made by no op, in the order they were first read (as
        the ops were added; in no particular order after update)."""
        return [t for t in self.consumers if t not in self.producer]

    @property
    def dangling_outs(self) -> list[str]:
        """The tensors made and read by no op, in the order they were made (as the ops
        were added; in no particular order after update)."""
        return [t for t in self.producer if t not in self.consumers]

    def check(self) -> None:
        """Every input must be produced by an op, and the graph must be acyclic."""
        for tname in self.dangling_ins:
            raise LightNetError(
                f"op '{self.consumers[tname][0]}' reads tensor '{tname}', which no op produces"
            )
        try:
            self.graph.topsort_layers()
        except CycleError as e:
            raise LightNetError(f"the model has a cycle among ops {e.nodes}") from None

    def to_dot(self, ops, tensors, filled=()) -> str:
        """Graphviz DOT of the graph drawn in the order of the op list `ops` (the
        graph's dicts have none after update): ops as boxes (filled for ops of the
        architectures `filled`, such as dnnl's, whose reorders then show where tensors
        cross), tensors as labelled edges (with a layout of their own when they have
        one); model outputs as edges to plain `output` nodes."""
        lines = ["digraph lightnet {", "  node [shape=box, fontname=monospace];"]
        for op in ops:
            label = _dot_id(op.name + "\n" + op.optype)
            style = ", style=filled, fillcolor=lightblue" if op.arch in filled else ""
            lines.append(f"  {_dot_id(op.name)} [label={label}{style}];")
        for op in ops:
            for succ, tname in self.graph.successors(op.name):
                lines.append(f"  {_dot_id(op.name)} -> {_dot_id(succ)} "
                             f"[label={_dot_id(_tensor_label(tensors, tname))}];")
        for op in ops:
            for tname in op.tensors_out.values():
                if tname in self.consumers:
                    continue
                out = _dot_id(f"out:{tname}")
                lines.append(f"  {out} [shape=plaintext, label={_dot_id(tname)}];")
                lines.append(f"  {_dot_id(op.name)} -> {out} "
                             f"[label={_dot_id(_tensor_label(tensors, tname))}];")
        lines.append("}")
        return "\n".join(lines) + "\n"

def _tensor_label(tensors, tname: str) -> str:
    entry = tensors.get(tname)
    if entry is None:
        return tname
    layout = f" {entry.layout.format}" if entry.layout is not None else ""
    return f"{tname} {entry.describe()}{layout}"


def _dot_id(text: str) -> str:
    """A quoted DOT identifier."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
