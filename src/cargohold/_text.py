"""Small text helpers with byte-exact budgets (UTF-8)."""

from __future__ import annotations

_SNIFF = 8192


def utf8_len(text: str) -> int:
    """Bytes of ``text`` in UTF-8."""
    return len(text.encode("utf-8", "surrogatepass"))


def cut_utf8(data: bytes, limit: int) -> bytes:
    """The longest prefix of ``data`` of at most ``limit`` bytes that ends on a character edge."""
    if len(data) <= limit:
        return data
    end = max(0, limit)
    # Step back over continuation bytes (10xxxxxx) so no character is split.
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end]


def cut_utf8_tail(data: bytes, limit: int) -> bytes:
    """The longest suffix of ``data`` of at most ``limit`` bytes that starts on a character edge."""
    if len(data) <= limit:
        return data
    start = len(data) - max(0, limit)
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def fit(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, on a character edge."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text
    return cut_utf8(raw, limit).decode("utf-8", "replace")


def looks_textual(data: bytes) -> bool:
    """Whether ``data`` is text: valid UTF-8 in its first 8 KiB and no NUL bytes there.

    A media type never decides: bytes that are not UTF-8 are not text, whatever they claim.
    """
    head = data[:_SNIFF]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multibyte character cut by the sniff window is still text; the window cuts only a
        # body longer than it, and a bad byte at the end of a shorter body is a bad byte.
        cut = len(data) > len(head) and exc.reason == "unexpected end of data"
        return cut and exc.end == len(head)
    return True


_BINARY_TYPES = ("image/", "audio/", "video/", "font/")
_BINARY_APPLICATIONS = frozenset(
    {"pdf", "gzip", "x-gzip", "zip", "x-tar", "x-7z-compressed", "x-bzip2", "x-xz", "zstd", "wasm"}
)


def looks_binary(data: bytes, media_type: str | None = None) -> bool:
    """Whether ``data`` is binary to the line tools: a NUL byte in its first 8 KiB (the test GNU
    grep makes), or bytes that are not UTF-8 text there under a binary media type (an image, a
    PDF, an archive: a media type alone never decides).

    More lenient than :func:`looks_textual`: text with bytes that are not UTF-8 still has lines
    to read and search (shown as U+FFFD).
    """
    if b"\x00" in data[:_SNIFF]:
        return True
    if media_type is None:
        return False
    base = media_type.partition(";")[0].strip().lower()
    kind, _, sub = base.partition("/")
    declared = (
        base.startswith(_BINARY_TYPES) and not sub.endswith("+xml")  # image/svg+xml is text
    ) or (kind == "application" and sub in _BINARY_APPLICATIONS)
    return declared and not looks_textual(data)


def decode(data: bytes) -> str:
    """UTF-8 text of ``data``, invalid sequences replaced (the preview says it is not exact)."""
    return data.decode("utf-8", "replace")


def line_offset(data: bytes, line: int) -> int:
    """The byte offset where 1-based ``line`` begins (``len(data)`` past the last line).

    Newlines are counted a mebibyte at a time, then by halving inside one: a few C-speed scans
    instead of a Python loop over every line of a multi-million-line body.
    """
    wanted = line - 1  # newlines before the line
    if wanted <= 0:
        return 0
    pos, step, total = 0, 1 << 20, len(data)
    while pos < total:
        found = data.count(b"\n", pos, pos + step)
        if found >= wanted:
            break
        wanted -= found
        pos += step
    else:
        return total
    low, high = pos, min(pos + step, total)
    while high - low > 4096:
        middle = (low + high) // 2
        found = data.count(b"\n", low, middle)
        if found >= wanted:
            high = middle
        else:
            wanted -= found
            low = middle
    for _ in range(wanted):
        low = data.index(b"\n", low) + 1
    return low


def is_text(text: str) -> bool:
    """Whether ``text`` is text: no lone surrogate, so it encodes as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
