"""A directed graph with edge data, topological sort into layers, cycle detection."""

from __future__ import annotations

from collections import deque


class CycleError(ValueError):
    """The graph has a cycle; `nodes` are the nodes on or behind it."""

    def __init__(self, nodes):
        self.nodes = nodes
        super().__init__(f"cycle among {sorted(map(str, nodes))}")


class Graph:
    """Nodes are hashable values; an edge from a to b carries data (any number of edges).

    Insertion order is kept everywhere, so sorts are deterministic.
    """

    def __init__(self):
        self._succ: dict = {}  # node -> list of (successor, edge data)
        self._pred: dict = {}  # node -> list of (predecessor, edge data)

    def __contains__(self, node) -> bool:
        return node in self._succ

    def __len__(self) -> int:
        return len(self._succ)

    @property
    def nodes(self) -> list:
        return list(self._succ)

    def add(self, node) -> None:
        if node not in self._succ:
            self._succ[node] = []
            self._pred[node] = []

    def remove(self, node) -> None:
        """Remove `node` and every edge to or from it."""
        for succ, data in self._succ.pop(node):
            self._pred[succ].remove((node, data))
        for pred, data in self._pred.pop(node):
            self._succ[pred].remove((node, data))

    def link(self, a, b, data=None) -> None:
        succ, pred = self._succ.get(a), self._pred.get(b)
        if succ is None:
            self.add(a)
            succ = self._succ[a]
        if pred is None:
            self.add(b)
            pred = self._pred[b]
        succ.append((b, data))
        pred.append((a, data))

    def unlink(self, a, b, data=None) -> bool:
        """Remove one edge a -> b carrying `data`; False if there was none."""
        if (b, data) not in self._succ.get(a, ()):
            return False
        self._succ[a].remove((b, data))
        self._pred[b].remove((a, data))
        return True

    def successors(self, node) -> list:
        return list(self._succ[node])

    def predecessors(self, node) -> list:
        return list(self._pred[node])

    def indegree(self, node) -> int:
        return len(self._pred[node])

    def outdegree(self, node) -> int:
        return len(self._succ[node])

    def num_outliers(self) -> int:
        """Nodes linked to no other node."""
        return sum(1 for n in self._succ if not self._succ[n] and not self._pred[n])

    def copy(self) -> "Graph":
        g = Graph()
        for node in self._succ:
            g.add(node)
        for node, edges in self._succ.items():
            for succ, data in edges:
                g.link(node, succ, data)
        return g

    def topsort_layers(self) -> list[list]:
        """Kahn's algorithm: layer k holds the nodes whose longest path from a
        source has k edges. Raises CycleError if the graph has a cycle."""
        indegree = {n: len(p) for n, p in self._pred.items()}
        layer = [n for n, d in indegree.items() if d == 0]
        layers = []
        seen = 0
        while layer:
            layers.append(layer)
            seen += len(layer)
            nxt = []
            for node in layer:
                for succ, _ in self._succ[node]:
                    indegree[succ] -= 1
                    if indegree[succ] == 0:
                        nxt.append(succ)
            layer = nxt
        if seen != len(self._succ):
            raise CycleError([n for n, d in indegree.items() if d > 0])
        return layers

    def has_cycle(self) -> bool:
        try:
            self.topsort_layers()
        except CycleError:
            return True
        return False

    def reachable(self, start) -> set:
        """Every node reachable from `start` (itself included)."""
        seen = {start}
        queue = deque([start])
        while queue:
            for succ, _ in self._succ[queue.popleft()]:
                if succ not in seen:
                    seen.add(succ)
                    queue.append(succ)
        return seen
