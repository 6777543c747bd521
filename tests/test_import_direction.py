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
