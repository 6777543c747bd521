"""Imports run one way: partition <- sim <- tuner. A cycle between packages is a design bug."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {"partition": {"sim", "tuner", "experiments", "tests"},
             "sim": {"tuner", "experiments", "tests"},
             "tuner": {"experiments", "tests"}}


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_run_one_way(package):
    bad = []
    for f in sorted((ROOT / package).rglob("*.py")):
        for mod in _imports(f):
            if mod in FORBIDDEN[package]:
                bad.append(f"{f.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_imports(path: pathlib.Path, modules: set[str]):
    """Modules of ``modules`` that ``path`` imports anywhere in it (deferred imports included: a
    circle hidden inside a function is still a circle)."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            if n in modules and n != me:
                yield n


def _cycles(folder: str) -> list[list[str]]:
    """Strongly connected groups of more than one module among the files under ``folder``; a
    package's ``__init__`` re-exporting its own modules is not a circle, so it is left out."""
    files = {_module_name(f): f for f in (ROOT / folder).rglob("*.py") if f.name != "__init__.py"}
    graph = {m: set(_file_imports(f, set(files))) for m, f in files.items()}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))
    for m in sorted(graph):
        if m not in index:
            visit(m)
    return out


@pytest.mark.parametrize("folder", ["partition/onnx", "sim"])
def test_no_file_level_import_circles(folder):
    assert _cycles(folder) == []


def test_cycle_finder_finds_a_circle(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")
    (pkg / "b.py").write_text("from pkg.a import f\n")
    (pkg / "c.py").write_text("from . import a\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert _cycles("pkg") == [["pkg.a", "pkg.b"]]
