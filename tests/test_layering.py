"""The layering holds: `codeloupe.api` sits on top of the engine and nothing below it imports it, and the
surfaces in server/ reach the engine only through `codeloupe.api` / `codeloupe.types`.

Every import statement counts, wherever it stands (module level, inside a function, under TYPE_CHECKING):
an annotation-only import of the API from below is still the circle the layering removes.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENGINE = REPO / "engine" / "codeloupe"
SERVER = REPO / "server"

# What stands on the API rather than under it: the package's own face, the CLI, and the evaluation harness
# (which opens workspaces the way a user would). `api.py` never calls into any of them.
ENGINE_SURFACES = ("__init__.py", "__main__.py", "cli/", "eval/")
SURFACE_MODULES = ("codeloupe.api", "codeloupe.cli", "codeloupe.eval")
# Above the engine, next to the servers: `python -m codeloupe_mcp` runs the CLI's `mcp` command.
SERVER_MAY_IMPORT = ("codeloupe.api", "codeloupe.types", "codeloupe.cli")


def imported_modules(path: Path, package: str) -> set[str]:
    """Every module `path` imports by name, relative imports resolved against `package`; `from codeloupe
    import X` adds `codeloupe.X` (a submodule, or a name the package re-exports from the API)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            if base == "codeloupe":
                out.update(f"codeloupe.{alias.name}" for alias in node.names)
    return out


def _package(path: Path, root: Path) -> str:
    """The package a file's relative imports start from (for `pkg/__init__.py` and `pkg/mod.py` alike: pkg)."""
    return ".".join(path.relative_to(root).parts[:-1])


def _is_within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _reexported_by_package() -> set[str]:
    """The names `codeloupe/__init__.py` takes from the API (importing them from `codeloupe` is importing the
    API), less those that are also submodules (`codeloupe.search`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse((ENGINE / "__init__.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "codeloupe.api":
            names.update(alias.asname or alias.name for alias in node.names)
    return {f"codeloupe.{name}" for name in names
            if not (ENGINE / f"{name}.py").exists() and not (ENGINE / name).is_dir()}


def engine_upward_imports() -> list[str]:
    """`file: module` for every engine module below the API that imports the API or a surface above it."""
    upward = _reexported_by_package()
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ENGINE).as_posix()
        if rel == "api.py" or rel.startswith(ENGINE_SURFACES):
            continue
        for module in imported_modules(path, ".".join(filter(None, ("codeloupe", _package(path, ENGINE))))):
            if module in upward or any(_is_within(module, above) for above in SURFACE_MODULES):
                found.append(f"{rel}: {module}")
    return sorted(found)


def server_engine_imports() -> list[str]:
    """`file: module` for every engine module a server package imports other than through the API or types."""
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        rel = path.relative_to(SERVER).as_posix()
        for module in imported_modules(path, _package(path, SERVER)):
            if _is_within(module, "codeloupe") and not any(_is_within(module, ok) for ok in SERVER_MAY_IMPORT):
                found.append(f"{rel}: {module}")
    return sorted(found)


def test_nothing_below_the_api_imports_it_or_a_surface_above_it():
    assert engine_upward_imports() == []


def test_servers_reach_the_engine_only_through_the_api_and_types():
    assert server_engine_imports() == []


def test_the_checks_see_imports_wherever_they_stand(tmp_path: Path):
    """The walk finds function-level, TYPE_CHECKING and relative imports (else the two tests above prove nothing)."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from codeloupe.api import Workspace\n"
        "def f():\n    from ..api import WorkspaceError\n    from codeloupe import Workspace\n"
        "import codeloupe.graph.build\n",
        encoding="utf-8")
    found = imported_modules(source, "codeloupe.graph")
    assert {"codeloupe.api", "codeloupe.Workspace", "codeloupe.graph.build"} <= found
    assert "codeloupe.Workspace" in _reexported_by_package()
