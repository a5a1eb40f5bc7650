"""cargohold benchmarks (``python -m bench``); see docs/benchmarks.md."""
