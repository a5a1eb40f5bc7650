"""RE2 options for patterns over bytes, shared by the scanners that use RE2."""

from __future__ import annotations

import re2


def byte_options(*, never_capture: bool = False, max_mem: int | None = None) -> re2.Options:
    """Options that match a body byte by byte, whatever its encoding: Latin-1, where every byte
    is one character (a UTF-8 character cut by a window, or binary input, is bytes like any
    other). ``never_capture`` lets RE2 find a match with its DFA alone (no capturing groups);
    ``max_mem`` gives the DFA room so that it never falls back to the NFA."""
    options = re2.Options()
    # The stubs type the field as an int; the binding takes only its own enum.
    options.encoding = re2.Options.Encoding.LATIN1  # type: ignore[attr-defined]
    if never_capture:
        options.never_capture = True
    if max_mem is not None:
        options.max_mem = max_mem
    return options
