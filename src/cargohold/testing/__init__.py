"""The store conformance suite, shipped so every backend passes the same tests.

One suite of plain pytest functions (:mod:`cargohold.testing.conformance`) states the store
contract, one behaviour per test. It runs against a backend through a :class:`StoreHarness`, a
small object that opens a fresh store, flips a stored byte as a disk fault would, and reopens a
store's data through a new handle. Backend differences are expressed by the harness, never by
skipping tests: a backend whose data does not outlive its handle returns ``None`` from
``reopen`` and the suite asserts those semantics instead.

To run the suite against a backend, define a fixture named ``store_harness`` in a test module and
star-import the suite into it::

    # tests/test_my_backend_conformance.py
    import pytest

    from cargohold.testing import LocalHarness, MemoryHarness, StoreHarness
    from cargohold.testing.conformance import *  # noqa: F403


    @pytest.fixture(params=["memory", "local"])
    def store_harness(request: pytest.FixtureRequest, tmp_path) -> StoreHarness:
        if request.param == "memory":
            return MemoryHarness()
        return LocalHarness(tmp_path)

A third-party backend implements :class:`StoreHarness` for itself (``open``, ``corrupt``,
``lose``, ``reopen`` and a ``name``). For pytest's detailed assertion messages inside the suite,
register the module for assertion rewriting in your ``conftest.py`` before it is imported::

    pytest.register_assert_rewrite("cargohold.testing.conformance")

This package imports pytest only in :mod:`cargohold.testing.conformance`; importing
``cargohold`` or ``cargohold.testing`` never does.
"""

from cargohold.testing._harness import FakeClock, LocalHarness, MemoryHarness, StoreHarness
from cargohold.testing._postgres import PostgresHarness

__all__ = ["FakeClock", "LocalHarness", "MemoryHarness", "PostgresHarness", "StoreHarness"]
