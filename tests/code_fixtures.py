"""The code-kind fixtures: cargohold's own history, diffs, grep output and source files.

Made by ``tests/fixtures/code/regenerate.py`` from fixed commits and committed (CI clones may be
shallow, so tests never run git); ``MANIFEST.tsv`` names each file's kind and media type. A kind
with no fixture is a failure, never an empty parameter set that pytest would quietly skip.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "code"


@dataclass(frozen=True, slots=True)
class CodeFixture:
    name: str
    kind: str
    media_type: str

    @property
    def path(self) -> Path:
        return FIXTURES / self.name

    def read(self) -> bytes:
        return self.path.read_bytes()


def _load() -> dict[str, CodeFixture]:
    with (FIXTURES / "MANIFEST.tsv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return {row["file"]: CodeFixture(row["file"], row["kind"], row["media_type"]) for row in rows}


CODE_FIXTURES: dict[str, CodeFixture] = _load()


def of_kind(kind: str) -> list[str]:
    """Names of the fixtures of ``kind``; raises if there is none (a hole, not a skip)."""
    names = sorted(name for name, fixture in CODE_FIXTURES.items() if fixture.kind == kind)
    if not names:
        raise LookupError(f"tests/fixtures/code holds no fixture of kind {kind!r}")
    return names
