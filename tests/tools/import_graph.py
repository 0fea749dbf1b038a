"""The product's import graph in figures: modules, import edges between them, levels (the longest
chain of imports, circles collapsed) and circles (strongly connected components of more than one
module), per package and for both together.

    .venv/bin/python -m tests.tools.import_graph [--circles]

Read from grimp (the graph import-linter checks), so every import statement counts, those inside
functions too, but not those under ``TYPE_CHECKING`` (they make no runtime dependency; the
import-linter contracts leave them out the same way); imports of a package's ``__init__`` by its own modules
count as edges like any other.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping

import grimp

PACKAGES = ("hub_ext", "server_ext")


def edges_of(graph, modules: Iterable[str]) -> dict[str, set[str]]:
    mods = set(modules)
    return {m: {t for t in graph.find_modules_directly_imported_by(m) if t in mods} for m in mods}


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def levels(edges: Mapping[str, set[str]], sccs: list[list[str]]) -> int:
    """The longest import chain, counted in modules, with each circle taken as one module."""
    rep = {m: m for m in edges}
    for scc in sccs:
        for m in scc:
            rep[m] = scc[0]
    dag: dict[str, set[str]] = {}
    for m, targets in edges.items():
        dag.setdefault(rep[m], set()).update(rep[t] for t in targets if rep[t] != rep[m])
    depth: dict[str, int] = {}

    def d(v: str) -> int:
        if v not in depth:
            depth[v] = 1 + max((d(w) for w in dag.get(v, ())), default=0)
        return depth[v]

    return max((d(v) for v in dag), default=0)


def figures(graph, modules: set[str]) -> dict:
    edges = edges_of(graph, modules)
    sccs = circles(edges)
    return {"modules": len(modules), "edges": sum(len(t) for t in edges.values()),
            "levels": levels(edges, sccs), "circles": sccs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--circles", action="store_true", help="name the modules of each circle")
    args = parser.parse_args(argv)
    graph = grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)
    everything = set(graph.modules)
    crossing = sum(1 for m in everything if m.startswith("server_ext")
                   for t in graph.find_modules_directly_imported_by(m) if t.startswith("hub_ext"))
    for name, mods in [*((p, {m for m in everything if m.split(".")[0] == p}) for p in PACKAGES),
                       ("both", everything)]:
        f = figures(graph, mods)
        print(f"{name:10} modules {f['modules']:4}  edges {f['edges']:5}  levels {f['levels']:3}"
              f"  circles {len(f['circles'])}")
        if args.circles:
            for scc in f["circles"]:
                print("   circle:", " <-> ".join(scc))
    print(f"server_ext -> hub_ext import edges: {crossing}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
