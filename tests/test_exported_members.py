"""The public surface is deliberate: ``__all__`` is sorted, complete and exact."""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
import types

import pytest

import cargohold
import cargohold.envelopes
import cargohold.guard
import cargohold.testing

MODULES = [cargohold, cargohold.testing, cargohold.envelopes, cargohold.guard]


def _names_bound_in(module: types.ModuleType) -> set[str]:
    """Public names bound at the top level of a module's source (imports and assignments)."""
    tree = ast.parse(inspect.getsource(module))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return {name for name in names if not name.startswith("_")}


def _isort_style(name: str) -> tuple[int, list[int | str]]:
    """Ruff's RUF022 order (the linter we run): CONSTANTS, then CamelCase, then the rest, each
    group in natural order."""
    group = 0 if name.upper() == name and len(name) > 1 else 1 if name[:1].isupper() else 2
    natural = [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
    return group, natural


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_is_sorted_without_duplicates(module: types.ModuleType) -> None:
    assert len(set(module.__all__)) == len(module.__all__)
    assert module.__all__ == sorted(module.__all__, key=_isort_style)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_exported_name_resolves(module: types.ModuleType) -> None:
    for name in module.__all__:
        assert getattr(module, name) is not None


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_is_exactly_the_public_names_the_init_defines(module: types.ModuleType) -> None:
    exports = getattr(module, "_EXPORTS", None)  # a package whose names resolve lazily
    expected = set(exports) if exports is not None else _names_bound_in(module)
    assert set(module.__all__) == expected


def _type_checking_imports(module: types.ModuleType) -> dict[str, str]:
    """``name -> module`` of the imports under ``if TYPE_CHECKING:`` (what type checkers see)."""
    found: dict[str, str] = {}
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    found.update({alias.name: inner.module for alias in inner.names})
    return found


def test_lazy_exports_are_what_type_checkers_see() -> None:
    assert _type_checking_imports(cargohold) == cargohold._EXPORTS


def test_importing_cargohold_imports_none_of_its_modules_until_a_name_is_used() -> None:
    code = (
        "import sys, cargohold; "
        "before = sorted(m for m in sys.modules if m.startswith('cargohold')); "
        "cargohold.Offloader; print(before, 'cargohold._offload' in sys.modules)"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )

    assert result.stdout.strip() == "['cargohold'] True"


_PUBLIC_ATTRIBUTES = (
    "import json, types, cargohold, cargohold.envelopes, cargohold.guard, cargohold.testing\n"
    "def public():\n"
    "    return sorted(n for n, v in vars(cargohold).items()\n"
    "                  if not n.startswith('_') and not isinstance(v, types.ModuleType))\n"
    "imported = public()\n"
    "for name in {*cargohold.__all__, *cargohold._EXPORTS}:  # every name that can load\n"
    "    getattr(cargohold, name)\n"
    "print(json.dumps({'imported': imported, 'loaded': public(), 'all': cargohold.__all__}))\n"
)
"""Print cargohold's public attributes once imported and once every lazy name is loaded."""


def test_no_public_attribute_of_the_package_is_left_out_of_all() -> None:
    # A fresh interpreter: in this one, which lazy names are already attributes depends on which
    # tests ran before. There, every public name is loaded (as if all were used) before looking.
    result = subprocess.run(
        [sys.executable, "-c", _PUBLIC_ATTRIBUTES],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    seen = json.loads(result.stdout)

    assert set(seen["imported"]) <= set(seen["all"])  # nothing public bound eagerly is left out
    assert set(seen["loaded"]) == set(seen["all"])  # nor anything loading a name binds


def test_importing_cargohold_or_its_harness_never_imports_pytest() -> None:
    code = (
        "import sys, cargohold, cargohold.testing; "
        "print(sorted(m for m in ('pytest', 'hypothesis', '_pytest') if m in sys.modules))"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )

    assert result.stdout.strip() == "[]"


PUBLIC_PACKAGES = [
    "cargohold",
    "cargohold.envelopes",
    "cargohold.gateway",
    "cargohold.guard",
    "cargohold.langchain",
    "cargohold.mcp",
    "cargohold.openai_agents",
    "cargohold.projection",
    "cargohold.store",
    "cargohold.testing",
    "cargohold.working",
]


def _undocumented_methods(cls: type) -> list[str]:
    """The public methods and properties a class defines without a docstring of its own (one
    inherited from a protocol does not show in the class's own source, which is what is read)."""
    missing: list[str] = []
    for attr, value in vars(cls).items():
        if attr.startswith("_"):
            continue
        function = value.fget if isinstance(value, property) else value
        if isinstance(function, staticmethod | classmethod):
            function = function.__func__
        if inspect.isfunction(function) and not (function.__doc__ or "").strip():
            missing.append(f"{cls.__module__}.{cls.__qualname__}.{attr}")
    return missing


def test_every_public_method_of_every_exported_class_has_a_docstring() -> None:
    import importlib

    missing: set[str] = set()
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value):
                missing.update(_undocumented_methods(value))

    assert sorted(missing) == []
