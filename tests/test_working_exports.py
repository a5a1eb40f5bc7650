"""The working context's public surface: cargohold.working.__all__ is sorted and exact, and the
names cargohold exports lazily are the very same objects."""

from __future__ import annotations

import ast
import inspect
import re

import cargohold
import cargohold.working


def _ruff_order(name: str) -> tuple[int, list[int | str]]:
    group = 0 if name.upper() == name and len(name) > 1 else 1 if name[:1].isupper() else 2
    return group, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def test_the_working_packages_all_is_sorted_and_exactly_what_it_imports() -> None:
    tree = ast.parse(inspect.getsource(cargohold.working))
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }

    assert cargohold.working.__all__ == sorted(cargohold.working.__all__, key=_ruff_order)
    assert set(cargohold.working.__all__) == imported


def test_the_top_level_names_of_the_working_context_are_the_working_packages_own() -> None:
    names = [n for n, module in cargohold._EXPORTS.items() if module == "cargohold.working"]

    assert "WorkingContext" in names
    for name in names:
        assert getattr(cargohold, name) is getattr(cargohold.working, name)
    assert cargohold.CompressOutcome.FALLBACK.value == "fallback"
