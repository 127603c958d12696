"""The architecture, enforced: imports flow one way, and the public API is what it says.

query → rows/validation → snapshot → interpreter (pure) → store → worker/runner/CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import flowrunner

PACKAGE = Path(flowrunner.__file__).parent

# module prefix -> what it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "flowrunner.query": (
        "flowrunner.binding",
        "flowrunner.rows",
        "flowrunner.validate",
        "flowrunner.interpreter",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.worker",
        "flowrunner.cli",
    ),
    "flowrunner.durations": ("flowrunner.query", "flowrunner.interpreter", "flowrunner.store"),
    "flowrunner.snapshot": ("flowrunner.interpreter", "flowrunner.store", "flowrunner.runner"),
    # The interpreter is pure: no SQL, no storage, no clock-owning modules.
    "flowrunner.interpreter": (
        "sqlalchemy",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.worker",
        "flowrunner.cli",
        "flowrunner.editing",
        "time",
        "threading",
    ),
    "flowrunner.store": ("flowrunner.runner", "flowrunner.worker", "flowrunner.cli"),
    "flowrunner.sanitize": ("flowrunner.store", "sqlalchemy"),
    "flowrunner.templates": ("flowrunner.store", "sqlalchemy"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_imports_flow_one_way(path: Path) -> None:
    name = _module_name(path)
    for prefix, forbidden in FORBIDDEN.items():
        if name == prefix or name.startswith(prefix + "."):
            bad = sorted(
                imported
                for imported in _imports(path)
                for banned in forbidden
                if imported == banned or imported.startswith(banned + ".")
            )
            assert not bad, f"{name} must not import {bad}"


def test_public_api_is_exactly_all() -> None:
    public = {name for name in dir(flowrunner) if not name.startswith("_")} - {"annotations"}
    modules = {name for name in public if type(getattr(flowrunner, name)).__name__ == "module"}
    assert public - modules == set(flowrunner.__all__)
    for name in flowrunner.__all__:
        assert getattr(flowrunner, name) is not None
