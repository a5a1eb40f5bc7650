"""Optional dependencies of the tests: skip without them locally, fail without them in CI.

``pytest.importorskip`` skips a whole module when an optional dependency is missing, and a CI
run that skips a module is green and tests nothing. ``require`` skips the same way on a
developer's machine, but under ``CI=true`` a missing dependency fails: at module level it is a
collection error, in a fixture or a test it is an error or a failure, never a skip.
"""

from __future__ import annotations

import importlib
import os
import types
from typing import NoReturn

import pytest


def under_ci() -> bool:
    """Whether this run is CI's (``CI`` is ``true``, in any case): nothing may skip for lack of
    a dependency there."""
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip (from a module, a fixture or a test) with ``reason``; fail with it under CI."""
    __tracebackhide__ = True  # report the caller's line, not this one
    if under_ci():
        pytest.fail(f"CI=true, so this cannot be skipped: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def _is_missing(error: ModuleNotFoundError, module_name: str) -> bool:
    """Whether ``error`` says ``module_name`` itself (or a package it is in) is not installed,
    rather than an installed module failing to import something of its own (a broken
    installation is an error, not a reason to skip)."""
    return error.name is not None and (
        module_name == error.name or module_name.startswith(f"{error.name}.")
    )


def require(module_name: str, extra: str) -> types.ModuleType:
    """Import ``module_name``; when it is not installed, skip (fail under CI) and name the
    extra that installs it.

    Args:
        module_name: The module to import, e.g. ``"openai"`` or ``"langchain_core.messages"``.
        extra: The extra of cargohold that provides it, e.g. ``"openai"`` (``dev`` has them all).

    Returns:
        The imported module.
    """
    __tracebackhide__ = True
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if not _is_missing(error, module_name):
            raise
        unavailable(
            f"{module_name} is not installed: install cargohold[{extra}] (or cargohold[dev])"
        )
