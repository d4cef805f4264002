"""lightnet.ir.dataflow: the data-flow graph of ops linked by tensor names."""

import pytest

from lightnet.errors import LightNetError
from lightnet.ir.dataflow import DataFlowGraph
from tests.helpers import bare_op as op


def edges(dfg):
    return sorted((a, b, t) for a in dfg.graph.nodes for b, t in dfg.graph.successors(a))


def snapshot(dfg):
    return (dict(dfg.ops), dict(dfg.producer), {t: list(c) for t, c in dfg.consumers.items()},
            dfg.graph.nodes, edges(dfg))


def chain():
    # a -> t1 -> b -> t2 -> c, and a's t1 also read by d; c makes t3 nobody reads.
    a, b, c, d = op("a", [], ["t1"]), op("b", ["t1"], ["t2"]), op("c", ["t2"], ["t3"]), \
        op("d", ["t1", "x"], [])
    return DataFlowGraph([a, b, c, d]), (a, b, c, d)


def test_add_links_producers_and_consumers():
    dfg, (a, b, c, d) = chain()
    assert list(dfg.ops) == ["a", "b", "c", "d"]
    assert edges(dfg) == [("a", "b", "t1"), ("a", "d", "t1"), ("b", "c", "t2")]
    assert dfg.producer == {"t1": "a", "t2": "b", "t3": "c"}
    assert dfg.consumers == {"t1": ["b", "d"], "t2": ["c"], "x": ["d"]}
    assert dfg.num_consumers("t1") == 2 and dfg.num_consumers("t3") == 0
    assert dfg.dangling_ins == ["x"]
    assert dfg.dangling_outs == ["t3"]


def test_add_in_any_order():
    # Consumers added before their producer are linked when it comes.
    a, b, c = op("a", [], ["t1"]), op("b", ["t1"], ["t2"]), op("c", ["t2", "t1"], [])
    dfg = DataFlowGraph([c, b, a])
    assert edges(dfg) == [("a", "b", "t1"), ("a", "c", "t1"), ("b", "c", "t2")]
    assert dfg.dangling_ins == [] and dfg.dangling_outs == []
    dfg.check()


def test_nexts_and_prev():
    dfg, (a, b, c, d) = chain()
    assert dfg.nexts(a, "t1") == [b, d]
    assert dfg.nexts(c, "t3") == []
    assert dfg.nexts(a, "t2") == []  # not an output of a
    assert dfg.prev(b, "t1") is a
    assert dfg.prev(c, "t2") is b
    assert dfg.prev(d, "x") is None  # nobody produces x
    assert dfg.prev(c, "t1") is None  # not an input of c


def test_duplicate_op_name():
    dfg, _ = chain()
    before = snapshot(dfg)
    with pytest.raises(LightNetError) as e:
        dfg.add(op("b", [], ["t9"]))
    assert str(e.value) == "op name 'b' is used twice"
    assert snapshot(dfg) == before


def test_duplicate_producer_leaves_graph_unchanged():
    dfg, _ = chain()
    before = snapshot(dfg)
    with pytest.raises(LightNetError) as e:
        dfg.add(op("e", ["t2"], ["t5", "t1"]))
    assert str(e.value) == "tensor 't1' is produced by both op 'a' and op 'e'"
    # A failed add changes nothing: the op can be fixed and added again.
    assert snapshot(dfg) == before
    dfg.add(op("e", ["t2"], ["t5"]))
    assert ("b", "e", "t2") in edges(dfg)


def test_one_op_producing_a_tensor_twice():
    dfg = DataFlowGraph()
    with pytest.raises(LightNetError) as e:
        dfg.add(op("a", [], ["t1", "t1"]))
    assert str(e.value) == "tensor 't1' is produced by both op 'a' and op 'a'"
    assert snapshot(dfg) == ({}, {}, {}, [], [])


def test_remove():
    dfg, (a, b, c, d) = chain()
    dfg.remove(b)
    assert list(dfg.ops) == ["a", "c", "d"]
    assert edges(dfg) == [("a", "d", "t1")]
    assert dfg.consumers == {"t1": ["d"], "t2": ["c"], "x": ["d"]}
    assert "t2" not in dfg.producer
    assert dfg.dangling_ins == ["t2", "x"]
    assert dfg.dangling_outs == ["t3"]
    assert dfg.prev(c, "t2") is None
    # Adding it back restores every edge.
    dfg.add(b)
    assert edges(dfg) == [("a", "b", "t1"), ("a", "d", "t1"), ("b", "c", "t2")]
    dfg.remove(d)
    assert dfg.consumers == {"t1": ["b"], "t2": ["c"]}
    assert dfg.dangling_ins == []
    dfg.remove(a)
    assert dfg.dangling_ins == ["t1"]
    assert dfg.dangling_outs == ["t3"]


def test_link_unlink():
    dfg, (a, b, c, d) = chain()
    dfg.unlink(a, b, "t1")
    assert edges(dfg) == [("a", "d", "t1"), ("b", "c", "t2")]
    dfg.link(a, c, "t1")
    assert edges(dfg) == [("a", "c", "t1"), ("a", "d", "t1"), ("b", "c", "t2")]
    dfg.unlink(a, b, "t1")  # no such edge: nothing happens
    assert len(edges(dfg)) == 3


def test_check_dangling_input():
    dfg, _ = chain()
    with pytest.raises(LightNetError) as e:
        dfg.check()
    assert str(e.value) == "op 'd' reads tensor 'x', which no op produces"
    dfg.add(op("p", [], ["x"]))
    dfg.check()


def test_check_cycle():
    dfg = DataFlowGraph([op("a", ["t2"], ["t1"]), op("b", ["t1"], ["t2"]),
                         op("c", [], ["t0"])])
    assert dfg.dangling_ins == []
    with pytest.raises(LightNetError) as e:
        dfg.check()
    assert str(e.value) == "the model has a cycle among ops ['a', 'b']"


def ordered(dfg):
    """Everything the graph holds: its dicts by content (update leaves them in no
    particular order), each list of a tensor's readers and of an op's edges in its order."""
    return (dfg.ops, dfg.producer, {t: list(r) for t, r in dfg.consumers.items()},
            {n: (dfg.graph.successors(n), dfg.graph.predecessors(n)) for n in dfg.graph.nodes},
            dfg.names)


def updated(dfg, ops, gone, suspects):
    dfg.update({o.name: i for i, o in enumerate(ops)}, gone, suspects)
    expected = DataFlowGraph()
    expected.rebuild(ops)
    assert ordered(dfg) == ordered(expected)


def test_update_makes_what_rebuild_makes():
    a, b, c, d = (op("a", [], ["t1", "u1"]), op("b", ["t1"], ["t2"]),
                  op("c", ["t2", "u1", "t1"], ["t3"]), op("d", ["t1", "t3", "t1"], []))
    dfg = DataFlowGraph([a, b, c, d])
    # An op put in another's place is taken out and added, which puts it last in every
    # list: update puts it back in op order.
    b = op("b", ["t1"], ["t2"])
    updated(dfg, [a, b, c, d], [], [b])
    assert dfg.ops["b"] is b and dfg.consumers["t1"] == ["b", "c", "d", "d"]
    assert dfg.graph.successors("a") == [("b", "t1"), ("c", "u1"), ("c", "t1"),
                                         ("d", "t1"), ("d", "t1")]
    # A pass inserts r (t1 -> t1r) before c, which reads t1r instead, and renames b's
    # output (its readers told before the graph).
    r = op("r", ["t1"], ["t1r"])
    c.tensors_in["in2"] = "t1r"
    b.tensors_out["out0"] = "t2b"
    c.tensors_in["in0"] = "t2b"
    updated(dfg, [a, b, r, c, d], [], [b, r, c])
    assert ("r", "c", "t1r") in edges(dfg) and ("a", "c", "t1") not in edges(dfg)
    assert dfg.names["c"] == (("t2b", "u1", "t1r"), ("t3",))
    assert dfg.consumers["t1"] == ["b", "r", "d", "d"]
    # ... then drops the copy again, and an op reading the same tensor twice.
    c.tensors_in["in2"] = "t1"
    updated(dfg, [a, b, c], [r, d], [c])
    assert "r" not in dfg.ops and "t1r" not in dfg.producer and "t3" not in dfg.consumers
    assert dfg.dangling_outs == ["t3"]


def test_remove_uses_the_tensors_an_op_was_added_with():
    dfg, (a, b, c, d) = chain()
    b.tensors_in["in0"] = "renamed"
    dfg.remove(b)
    assert dfg.consumers == {"t1": ["d"], "t2": ["c"], "x": ["d"]}
    assert "t2" not in dfg.producer
