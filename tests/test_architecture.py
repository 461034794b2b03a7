"""The package's structure: no import cycle in hierdp/ (beyond the named ones its owners are
removing), the layer contracts of pyproject.toml, and the placement rule's checkable half
(experiments never import from tests/).

Oracle: the import graph as grimp (import-linter's engine) builds it from the source, every
import counted (module level and inside functions; ``if TYPE_CHECKING`` blocks excluded, as they
never run); cycles are its strongly connected components (networkx)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

grimp = pytest.importorskip("grimp")

ROOT = Path(__file__).resolve().parents[1]

#: cycles still open, each with the reason it stays (issue 21); the test fails on any other cycle
KNOWN_CYCLES: dict[frozenset[str], str] = {}  # none left


def _graph() -> nx.DiGraph:
    g = grimp.build_graph("hierdp", include_external_packages=False, exclude_type_checking_imports=True)
    out = nx.DiGraph()
    for module in g.modules:
        out.add_node(module)
        for imported in g.find_modules_directly_imported_by(module):
            out.add_edge(module, imported)
    return out


def test_no_import_cycle_in_hierdp_beyond_the_named_ones() -> None:
    g = _graph()
    cycles = [frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    unexpected = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert unexpected == [], f"import cycles: {unexpected}"


def test_the_cycle_check_sees_function_level_imports(tmp_path) -> None:
    """The oracle itself: a cycle made by an import inside a function is found."""
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from cyc import b\n")
    (pkg / "b.py").write_text("import cyc.a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        g = grimp.build_graph("cyc", include_external_packages=False)
    finally:
        sys.path.remove(str(tmp_path))
    assert g.find_modules_directly_imported_by("cyc.a") == {"cyc.b"}
    assert g.find_modules_directly_imported_by("cyc.b") == {"cyc.a"}


def test_layer_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    proc = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_experiments_never_import_from_tests() -> None:
    offenders = []
    for path in sorted((ROOT / "experiments").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "tests" or n.startswith("tests.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        if '"tests"' in path.read_text(encoding="utf-8") and "sys.path" in path.read_text(encoding="utf-8"):
            offenders.append(f"{path.relative_to(ROOT)}: puts tests/ on sys.path")
    assert offenders == []
