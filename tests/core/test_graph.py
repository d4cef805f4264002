"""lightnet.ir.digraph: edges with data, layered topological sort, cycles, reachability."""

import random

import pytest

from lightnet.ir.digraph import CycleError, Graph


def graph(*edges, nodes=()):
    g = Graph()
    for n in nodes:
        g.add(n)
    for edge in edges:
        g.link(*edge)
    return g


def test_empty():
    g = Graph()
    assert len(g) == 0
    assert g.nodes == []
    assert g.topsort_layers() == []
    assert not g.has_cycle()
    assert g.num_outliers() == 0


def test_add_link_keeps_order():
    g = graph(("c", "a", 1), ("c", "b", 2), nodes=["x"])
    assert g.nodes == ["x", "c", "a", "b"]
    assert "a" in g and "zz" not in g
    assert len(g) == 4
    g.add("a")  # adding twice changes nothing
    assert g.nodes == ["x", "c", "a", "b"]
    assert g.successors("c") == [("a", 1), ("b", 2)]
    assert g.predecessors("a") == [("c", 1)]
    assert g.successors("a") == []
    assert (g.indegree("a"), g.outdegree("c"), g.indegree("c")) == (1, 2, 0)


def test_parallel_edges_and_unlink():
    g = graph(("a", "b", "t1"), ("a", "b", "t2"), ("a", "b", "t1"))
    assert g.outdegree("a") == 3 and g.indegree("b") == 3
    assert g.unlink("a", "b", "t1") is True
    assert g.successors("a") == [("b", "t2"), ("b", "t1")]
    assert g.predecessors("b") == [("a", "t2"), ("a", "t1")]
    assert g.unlink("a", "b", "t9") is False  # no edge with that data
    assert g.unlink("b", "a", "t2") is False  # wrong direction
    assert g.unlink("zz", "a", "t2") is False  # unknown node
    assert g.unlink("a", "b", "t2") and g.unlink("a", "b", "t1")
    assert g.successors("a") == [] and g.predecessors("b") == []
    assert g.nodes == ["a", "b"]  # unlink keeps the nodes
    g.link("a", "b")
    assert g.unlink("a", "b") is True  # default data None


def test_successors_are_copies():
    g = graph(("a", "b", 1))
    g.successors("a").clear()
    g.predecessors("b").clear()
    assert g.successors("a") == [("b", 1)] and g.predecessors("b") == [("a", 1)]


def test_remove():
    g = graph(("a", "b", 1), ("b", "c", 2), ("a", "c", 3), ("c", "b", 4), ("b", "b", 5))
    g.remove("b")
    assert g.nodes == ["a", "c"]
    assert g.successors("a") == [("c", 3)]
    assert g.predecessors("c") == [("a", 3)]
    assert g.successors("c") == []
    with pytest.raises(KeyError):
        g.remove("b")


def test_num_outliers():
    g = graph(("a", "b"), nodes=["x", "y"])
    assert g.num_outliers() == 2
    g.link("x", "x")  # a self loop links x to a node
    assert g.num_outliers() == 1
    g.unlink("a", "b")
    assert g.num_outliers() == 3


def test_copy_is_independent():
    g = graph(("a", "b", 1), ("b", "c", 2), nodes=["z"])
    h = g.copy()
    assert h.nodes == g.nodes
    assert all(h.successors(n) == g.successors(n) for n in g.nodes)
    assert all(h.predecessors(n) == g.predecessors(n) for n in g.nodes)
    h.link("c", "a", 3)
    h.remove("z")
    h.unlink("a", "b", 1)
    assert g.nodes == ["z", "a", "b", "c"]
    assert g.successors("a") == [("b", 1)] and g.successors("c") == []
    assert h.has_cycle() is False  # a-b was cut
    assert not g.has_cycle()


@pytest.mark.parametrize(
    "edges, nodes, layers",
    [
        # A chain.
        ([("a", "b"), ("b", "c")], [], [["a"], ["b"], ["c"]]),
        # A diamond with a shortcut: d waits for its longest path.
        ([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "d")], [],
         [["a"], ["b", "c"], ["d"]]),
        # Two sources, a long and a short branch joining at e.
        ([("a", "b"), ("b", "c"), ("c", "e"), ("x", "e"), ("x", "y")], [],
         [["a", "x"], ["b", "y"], ["c"], ["e"]]),
        # Isolated nodes are sources; parallel edges count once each.
        ([("p", "q", 1), ("p", "q", 2)], ["i"], [["i", "p"], ["q"]]),
        # Layer order follows insertion order.
        ([(3, 1), (3, 2), (2, 0), (1, 0)], [], [[3], [1, 2], [0]]),
        ([("z", "y"), ("z", "b"), ("a", "m")], ["q"], [["q", "z", "a"], ["y", "b", "m"]]),
    ],
)
def test_topsort_layers(edges, nodes, layers):
    g = graph(*edges, nodes=nodes)
    assert g.topsort_layers() == layers
    assert not g.has_cycle()


@pytest.mark.parametrize(
    "edges, on_cycle",
    [
        ([("a", "a")], ["a"]),
        ([("a", "b"), ("b", "a")], ["a", "b"]),
        # Nodes behind the cycle are reported too; those before it are not.
        ([("s", "a"), ("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")], ["a", "b", "c", "d"]),
    ],
)
def test_cycle(edges, on_cycle):
    g = graph(*edges)
    assert g.has_cycle()
    with pytest.raises(CycleError) as e:
        g.topsort_layers()
    assert sorted(e.value.nodes) == on_cycle
    assert str(e.value) == f"cycle among {on_cycle}"
    assert isinstance(e.value, ValueError)


def test_reachable():
    g = graph(("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("x", "d"), nodes=["z"])
    assert g.reachable("a") == {"a", "b", "c", "d"}
    assert g.reachable("d") == {"d"}
    assert g.reachable("x") == {"x", "d"}
    assert g.reachable("z") == {"z"}


def _naive_longest_path_layers(nodes, edges):
    """Layer of each node: the longest path from any source, by repeated relaxation."""
    depth = {n: 0 for n in nodes}
    for _ in nodes:
        for a, b in edges:
            depth[b] = max(depth[b], depth[a] + 1)
    return depth


def _naive_reachable(start, edges):
    seen = {start}
    changed = True
    while changed:
        changed = False
        for a, b in edges:
            if a in seen and b not in seen:
                seen.add(b)
                changed = True
    return seen


def test_random_dags_against_naive_reference():
    rng = random.Random(42)
    for _ in range(200):
        n = rng.randint(1, 12)
        order = list(range(n))
        rng.shuffle(order)  # a hidden topological order
        edges = [(order[i], order[j]) for i in range(n) for j in range(i + 1, n)
                 if rng.random() < 0.3]
        g = graph(*edges, nodes=rng.sample(range(n), n))
        layers = g.topsort_layers()
        depth = _naive_longest_path_layers(range(n), edges)
        assert sorted(x for layer in layers for x in layer) == list(range(n))
        for k, layer in enumerate(layers):
            assert all(depth[x] == k for x in layer)
            assert len(set(layer)) == len(layer)
        start = rng.randrange(n)
        assert g.reachable(start) == _naive_reachable(start, edges)
        if edges and rng.random() < 0.5:
            # Close a cycle with a back edge: some node reaches its own ancestor.
            a, b = rng.choice(edges)
            g.link(b, a)
            assert g.has_cycle()
            with pytest.raises(CycleError) as e:
                g.topsort_layers()
            assert a in e.value.nodes and b in e.value.nodes
