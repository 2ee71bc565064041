"""The package's layout (tools/tilekit/__init__.py): three subpackages whose imports run one way,
testing -> reports -> runtime, with no import circle between modules; a kernel's runtime files
(op.py, spec.py, baselines.py) import the runtime only. Imports are read with ast, those inside
functions too (a lazy import is an import)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tools" / "tilekit"
ORDER = ("runtime", "reports", "testing")  # each may import those before it, and itself


def tilekit_imports(path: Path) -> set[str]:
    """The tilekit modules a file imports, as dotted names below tilekit ("runtime.port")."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tilekit":
            base = node.module.split(".")[1:]
            if len(base) == 1:  # from tilekit.runtime import port, ffi
                found |= {f"{base[0]}.{alias.name}" for alias in node.names}
            elif base:  # from tilekit.runtime.port import entry
                found.add(".".join(base[:2]))
        elif isinstance(node, ast.Import):
            found |= {".".join(a.name.split(".")[1:3]) for a in node.names if a.name.startswith("tilekit.")}
    return {name for name in found if name}


def modules() -> dict[str, set[str]]:
    """{"runtime.port": its tilekit imports} for every module of the three subpackages."""
    return {
        f"{path.parent.name}.{path.stem}": tilekit_imports(path)
        for group in ORDER
        for path in sorted((PACKAGE / group).glob("*.py"))
        if path.stem != "__init__"
    }


def test_the_package_holds_three_subpackages_and_its_cli():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ORDER)


@pytest.mark.parametrize("group", ORDER)
def test_imports_run_one_way(group):
    allowed = set(ORDER[: ORDER.index(group) + 1])
    wrong = {
        f"{module} imports tilekit.{imported}"
        for module, imports in modules().items()
        if module.startswith(f"{group}.")
        for imported in imports
        if imported.split(".")[0] not in allowed
    }
    assert not wrong, f"tilekit.{group} may import only {sorted(allowed)}: {sorted(wrong)}"


def test_no_module_is_in_an_import_circle():
    graph = modules()
    graph = {m: {i for i in imports if i in graph and i != m} for m, imports in graph.items()}
    state, circles = {}, []

    def visit(module, path):
        state[module] = "open"
        for nxt in sorted(graph[module]):
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not circles, " ; ".join(" -> ".join(c) for c in circles)


def test_a_kernels_runtime_files_import_only_the_runtime():
    wrong = {
        f"{path.relative_to(ROOT)} imports tilekit.{imported}"
        for path in sorted(ROOT.glob("kernels/*/*.py"))
        if path.stem in ("op", "spec", "baselines")
        for imported in tilekit_imports(path)
        if not imported.startswith("runtime.")
    }
    assert not wrong, sorted(wrong)
