"""The layout's numbers (issue #51): modules per folder, imports that run from a lower layer back up, import cycles.

    python .ci/layout_metrics.py            # this checkout
    python .ci/layout_metrics.py --tree DIR # another checkout (e.g. a `git worktree` of the commit before the move)

Layers, lowest first: `registry` (names, no imports) < `model` (what ships in a checkpoint) < `data`, `science`
< `publish` < `training` < `cli`. The package root re-exports the model and counts as `model`. A module of the
flat layout before the move is ranked by the folder it moved to (`MOVED`), so the two layouts are measured alike.
Every import counts, also one inside a function (that is how a cycle hides). Reads files, imports nothing.
"""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path

RANK = {"registry": 0, "model": 1, "data": 2, "science": 2, "publish": 3, "training": 4, "cli": 5}
# where each top-level module of the flat layout went (issue #51)
MOVED = {
    **dict.fromkeys(
        "configuration_deep_nmt modeling_deep_nmt caches collapse_losses initialization layer_aggregation "
        "layer_sharing merged_attention residual transformers_compat translation_pipeline pipeline_shipping".split(),
        "model",
    ),
    **dict.fromkeys("preprocessing streaming tokenization batching synthetic atomic".split(), "data"),
    **dict.fromkeys(
        "admin averaging optimizers distributed sharding generation_settings length_penalty activation_memory".split(),
        "training",
    ),
    **dict.fromkeys("folding export hub".split(), "publish"),
    **dict.fromkeys("recipes paper_presets significance plots".split(), "science"),
}
PACKAGE = "deep_nmt_hf"


def modules(tree: Path) -> dict[str, Path]:
    root = tree / PACKAGE
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports, anywhere in the file."""
    out = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith(PACKAGE):
                continue
            names = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            out.update(names or ([target] if target in known else []))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
    out.discard(name)
    return out


def layer(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1:
        return "model"  # the package root: the model's public face
    if parts[1] in RANK:
        return parts[1]
    if parts[1] in MOVED:
        return MOVED[parts[1]]
    raise SystemExit(f"{name}: no layer (add it to RANK or MOVED)")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def bench_graph(tree: Path) -> dict[str, set[str]]:
    """bench/'s modules (the top level and any package below it) and which of them each imports."""
    root = tree / "bench"
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            names[".".join(parts)] = path
    # bench is a package: bench/lib/common.py imports as `bench.lib.common` (or relatively, `..common`)
    short = {f"bench.{n}": n for n in names}
    graph = {}
    for name, path in names.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets.add(node.module)
                # `from bench.lib.depth import report` names a module too
                targets.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level:
                base = name.split(".")[: -node.level] if path.name != "__init__.py" else name.split(".")
                targets.update(".".join(base + [a.name]) for a in node.names)
                if node.module:
                    targets.add(".".join(base + [node.module]))
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
        graph[name] = {short.get(t, t) for t in targets if short.get(t, t) in names} - {name}
    return graph


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    known = modules(args.tree)
    graph = {name: imports(name, path, known) for name, path in known.items()}
    folders = collections.Counter(
        "/".join(path.relative_to(args.tree).parent.parts)
        for path in known.values()
        if path.name != "__init__.py"
    )
    print("modules per folder:", ", ".join(f"{f} {n}" for f, n in sorted(folders.items())))
    upward = [
        (a, b) for a, targets in graph.items() for b in sorted(targets) if RANK[layer(b)] > RANK[layer(a)]
    ]
    print(f"imports from a lower layer up: {len(upward)}")
    for a, b in upward:
        print(f"  {a} ({layer(a)}) -> {b} ({layer(b)})")
    found = cycles(graph)
    print(f"import cycles: {len(found)} ({sum(map(len, found))} modules)")
    for component in found:
        print("  " + " <-> ".join(component))
    bench = bench_graph(args.tree)
    runnable = [
        n for n in bench if "." not in n and "__main__" in (args.tree / "bench" / f"{n}.py").read_text()
    ]
    print(f"bench: {len(runnable)} runnable scripts at the top, {len(bench) - len(runnable)} other modules")
    found = cycles(bench)
    print(f"bench import cycles: {len(found)} ({sum(map(len, found))} modules)")
    for component in found:
        print("  " + " <-> ".join(component))


if __name__ == "__main__":
    main()
