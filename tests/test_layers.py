"""The package's structure, checked from its source: imports form no circle (between
modules, or between packages), the runtime imports nothing of the compile side, lowering
imports nothing of the runtime, only ``aotexec/options.py`` reads the environment, passes
and lowering hold no tables keyed by op name, and no module is over 600 lines.
Reads source only: nothing is compiled."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from aotexec.ops import OPS

pytestmark = pytest.mark.lowering      # the fast tier: no IREE compile

PKG = Path(__file__).resolve().parent.parent / "aotexec"
# modules that need the compiler or exist only to produce programs
COMPILE_SIDE = ("aotexec.pipeline", "aotexec.compiler", "aotexec.compile_cache", "aotexec.lowering",
                "aotexec.debug_str", "aotexec.passes.gradient", "aotexec.passes.mirror",
                "aotexec.passes.plan_memory", "aotexec.passes.training_graph", "aotexec.passes.layout")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """aotexec modules ``name`` imports anywhere in its body (lazy imports count too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and
                   getattr(block.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            mod = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            # ``from pkg import sub`` depends on the submodule; the package's own code only when
            # a name is not a submodule (``from .ops import OPS``)
            subs = [f"{mod}.{a.name}" for a in node.names]
            targets = subs + ([mod] if not all(t in MODULES for t in subs) else [])
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of ``graph`` if it has one (iterative DFS)."""
    state: dict[str, int] = {}
    for root in graph:
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
                path.append(nxt)
    return None


def _package(name: str) -> str:
    """The folder a module lives in (top-level modules are their own unit)."""
    return name if MODULES[name].name == "__init__.py" or name.count(".") == 1 else name.rpartition(".")[0]


def test_no_import_circle_between_modules():
    assert _cycle(GRAPH) is None, " -> ".join(_cycle(GRAPH))


def test_no_import_circle_between_packages():
    """ops, passes, lowering, pipeline, runtime, symbol: each layer imports only layers below it."""
    pkgs: dict[str, set[str]] = {}
    for name, deps in GRAPH.items():
        mine = _package(name)
        pkgs.setdefault(mine, set()).update(d for d in map(_package, deps) if d != mine and d != "aotexec")
    assert _cycle(pkgs) is None, " -> ".join(_cycle(pkgs))


def _compile_side(mod: str) -> bool:
    return any(mod == c or mod.startswith(c + ".") for c in COMPILE_SIDE)


# training and batch inference from an artifact on a runtime-only install need these too
RUNTIME_SIDE = ("aotexec.runtime", "aotexec.distributed", "aotexec.kvstore", "aotexec.optimizer", "aotexec.ray")


def test_runtime_imports_no_compile_side_module():
    bad = {name: sorted(filter(_compile_side, deps)) for name, deps in GRAPH.items()
           if name.startswith(RUNTIME_SIDE)}
    assert not any(bad.values()), {k: v for k, v in bad.items() if v}


def test_lowering_imports_no_runtime_module():
    bad = {name: sorted(d for d in deps if d.startswith("aotexec.runtime")) for name, deps in GRAPH.items()
           if name.startswith("aotexec.lowering")}
    assert not any(bad.values()), {k: v for k, v in bad.items() if v}


def test_only_the_options_module_reads_the_environment():
    readers = [str(p.relative_to(PKG.parent)) for name, p in MODULES.items()
               if name != "aotexec.options" and any(s in p.read_text() for s in ("os.environ", "os.getenv", "getenv("))]
    assert readers == []


def test_no_module_over_600_lines():
    long = {str(p.relative_to(PKG.parent)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def _is_op_name(e: ast.AST) -> bool:
    """``<x>.op.name``, ``op.name`` or ``<x>.op_name``: an operator's name read for a decision."""
    if isinstance(e, ast.Attribute) and e.attr == "op_name":
        return True
    return isinstance(e, ast.Attribute) and e.attr == "name" and (
        isinstance(e.value, ast.Attribute) and e.value.attr == "op" or isinstance(e.value, ast.Name) and e.value.id == "op")


def _op_name_tables(path: Path) -> list[str]:
    """Decisions keyed by an op's name: ``op.name`` compared, looked up, or put in a key tuple;
    and module-level collections of three or more op names (a table of ops)."""
    canonical = {n for n, op in OPS.items() if op.name == n}
    tree = ast.parse(path.read_text())
    hits = []
    for node in ast.walk(tree):
        keyed = []
        if isinstance(node, ast.Compare):
            keyed = [node.left, *node.comparators]
        elif isinstance(node, ast.Subscript):
            keyed = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            keyed = node.args[:1]
        for k in keyed:
            parts = k.elts if isinstance(k, ast.Tuple) else [k]
            hits += [f"{path.name}:{node.lineno} op name used as a key" for p in parts if _is_op_name(p)]
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        elts = value.elts if isinstance(value, (ast.Set, ast.List, ast.Tuple)) else \
            [k for k in value.keys if k is not None] if isinstance(value, ast.Dict) else []
        names = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in canonical]
        if len(names) >= 3:
            hits.append(f"{path.name}:{node.lineno} a table of ops {names[:3]}...")
    return hits


def test_passes_and_lowering_hold_no_op_name_tables():
    """What a pass needs of an op is an attribute of its OpDef (ops/registry.py), not a table."""
    paths = [p for name, p in MODULES.items() if name.startswith(("aotexec.passes", "aotexec.lowering"))]
    hits = [h for p in paths for h in _op_name_tables(p)]
    assert hits == []


def test_op_name_table_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('INPLACE = {"Activation", "relu", "Convolution"}\nif node.op.name == "Convolution":\n    pass\n'
                   'x = (n.op.name, 0) in SHAPE_ONLY\ny = TABLE.get(n.op.name, ())\nz = TABLE[n.op_name]\n')
    assert len(_op_name_tables(bad)) == 5
