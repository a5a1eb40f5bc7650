"""Describers of binary bodies, base64 text and data URIs: what the bytes say of themselves.

Never a preview of the content, and never any of the base64 text: the format (magic bytes), the
size, what the format's header states (image dimensions for PNG, JPEG, GIF and WebP; PDF version
and an estimate of the page count; gzip's original name and size; zip's entry count and first names;
ELF class and machine; SQLite page size and count), and the first and last bytes in hex.

Base64 is decoded as a stream, a chunk at a time, keeping only the first and last 64 KiB of the
decoded bytes (what sniffing needs) and a running count of PDF page objects.
"""

from __future__ import annotations

import binascii
import io
import re
import struct
import zipfile
from dataclasses import dataclass, field

from cargohold.projection._detect import _binary_format
from cargohold.projection._model import Builder, Detection, clip

_KEEP = 64 * 1024
"""Decoded bytes kept from each end of a base64 body for sniffing."""
_CHUNK = 1024 * 1024
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(
    rb"/Type\s*/Pages\b[^>]{0,400}?/Count\s+(\d{1,7})|/Count\s+(\d{1,7})[^>]{0,400}?/Type\s*/Pages\b"
)
_LINEARIZED = re.compile(rb"/Linearized\s")
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_NOT_BASE64 = bytes(b for b in range(256) if b not in _ALPHABET)
"""Bytes outside base64's alphabet: deleted with ``bytes.translate`` (C speed, no regex)."""
_SPACES = b" \t\n\r\x0b\x0c"
_DATA_URI = re.compile(rb"\s*data:([\w.+-]+/[\w.+-]+)((?:;[\w.+-]+=[\w.+-]+)*);base64,")
_PAYLOAD = re.compile(rb"[A-Za-z0-9+/=_\-\s]*")
_PNG_COLOR = {0: "grayscale", 2: "RGB", 3: "palette", 4: "grayscale+alpha", 6: "RGBA"}
_ELF_MACHINE = {
    3: "x86",
    8: "MIPS",
    20: "PowerPC",
    21: "PowerPC64",
    40: "ARM",
    62: "x86-64",
    183: "AArch64",
    243: "RISC-V",
}


@dataclass(slots=True)
class _Decoded:
    head: bytes = b""
    tail: bytes = b""
    size: int = 0
    pages: int = 0
    counts: list[int] = field(default_factory=list)
    linearized: bool = False
    invalid: int = 0
    error_at: int | None = None


def _hex(data: bytes) -> str:
    shown = " ".join(f"{b:02x}" for b in data)
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in data)
    return f"{shown}  |{text}|"


def _page_counts(data: bytes) -> list[int]:
    return [int(a or b) for a, b in _COUNT.findall(data)]


def _png(head: bytes) -> str | None:
    if len(head) < 29 or head[12:16] != b"IHDR":
        return None
    width, height, depth, color = struct.unpack(">IIBB", head[16:26])
    interlace = ", interlaced" if head[28] == 1 else ""
    kind = _PNG_COLOR.get(color, f"color type {color}")
    return f"PNG image {width}x{height}, {depth}-bit {kind}{interlace}"


def _jpeg(head: bytes) -> str | None:
    at = 2
    while at + 4 <= len(head):
        if head[at] != 0xFF:
            at += 1
            continue
        marker = head[at + 1]
        if marker == 0xFF:
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xDA)):
            at += 2
            continue
        (length,) = struct.unpack(">H", head[at + 2 : at + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if at + 10 > len(head):
                return None
            precision, height, width, parts = struct.unpack(">BHHB", head[at + 4 : at + 10])
            mode = "progressive" if marker in (0xC2, 0xC6, 0xCA, 0xCE) else "baseline"
            return f"JPEG image {width}x{height}, {parts} components, {precision}-bit {mode}"
        if marker == 0xDA:
            return None
        at += 2 + length
    return None


def _gif(head: bytes) -> str | None:
    if len(head) < 10:
        return None
    width, height = struct.unpack("<HH", head[6:10])
    return f"GIF image {width}x{height} ({head[:6].decode('ascii', 'replace')})"


def _pdf(head: bytes, pages: int, counts: list[int], linearized: bool) -> str:
    match = re.match(rb"%PDF-(\d\.\d)", head)
    version = match.group(1).decode() if match else "?"
    parts = [f"PDF {version}"]
    if pages:
        parts.append(f"about {pages:,} pages (/Type /Page objects)")
    if counts:
        parts.append(f"page tree /Count {max(counts):,}")
    if not pages and not counts:
        parts.append("page count not visible (compressed object streams)")
    if linearized:
        parts.append("linearized")
    return ", ".join(parts)


def _gzip(head: bytes, tail: bytes) -> str:
    parts = ["gzip"]
    if len(head) >= 10:
        flags = head[3]
        at = 10
        if flags & 0x04 and len(head) >= 12:
            at += 2 + struct.unpack("<H", head[10:12])[0]
        if flags & 0x08:
            end = head.find(b"\x00", at, at + 1024)
            if end > at:
                name = head[at:end].decode("latin-1")
                parts.append(f"original name {clip(name, 120)!r}")
    if len(tail) >= 4:
        size = struct.unpack("<I", tail[-4:])[0]
        parts.append(f"uncompressed size {size:,} bytes (mod 4 GiB)")
    return ", ".join(parts)


def _zip(data: bytes | None, tail: bytes) -> str:
    if data is not None:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                entries = archive.infolist()
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError):
            entries = None
        if entries is not None:
            names = ", ".join(clip(e.filename, 80) for e in entries[:10])
            more = f", +{len(entries) - 10:,} more" if len(entries) > 10 else ""
            size = sum(e.file_size for e in entries)
            return (
                f"zip archive, {len(entries):,} entries, {size:,} bytes uncompressed; "
                f"first: {names}{more}"
            )
    end = tail.rfind(b"PK\x05\x06")
    if end >= 0 and end + 12 <= len(tail):
        (count,) = struct.unpack("<H", tail[end + 10 : end + 12])
        return f"zip archive, {count:,} entries (from its end record)"
    return "zip archive, directory unreadable"


def _elf(head: bytes) -> str | None:
    if len(head) < 20:
        return None
    bits = {1: "32-bit", 2: "64-bit"}.get(head[4], "?")
    order = "<" if head[5] == 1 else ">"
    kind, machine = struct.unpack(order + "HH", head[16:20])
    kinds = {1: "relocatable", 2: "executable", 3: "shared object", 4: "core"}
    name = _ELF_MACHINE.get(machine, f"machine {machine}")
    return f"ELF {bits} {kinds.get(kind, f'type {kind}')}, {name}"


def _sqlite(head: bytes) -> str | None:
    if len(head) < 32:
        return None
    (page,) = struct.unpack(">H", head[16:18])
    (pages,) = struct.unpack(">I", head[28:32])
    page_size = 65536 if page == 1 else page
    return f"SQLite 3 database, page size {page_size:,}, {pages:,} pages"


def _riff(head: bytes) -> str | None:
    if len(head) < 12:
        return None
    return f"RIFF container, form {head[8:12].decode('ascii', 'replace')!r}"


def _webp(head: bytes) -> str | None:
    """WebP's canvas size from its first chunk: VP8X (extended), VP8L (lossless) or VP8."""
    chunk = head[12:16]
    if chunk == b"VP8X" and len(head) >= 30:
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return f"WebP image {width}x{height} (extended)"
    if chunk == b"VP8L" and len(head) >= 25 and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return f"WebP image {(bits & 0x3FFF) + 1}x{((bits >> 14) & 0x3FFF) + 1} (lossless)"
    if chunk == b"VP8 " and len(head) >= 30 and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return f"WebP image {width & 0x3FFF}x{height & 0x3FFF} (lossy)"
    return "WebP image"


def _describe(
    kind: str,
    head: bytes,
    tail: bytes,
    whole: bytes | None,
    pages: int,
    counts: list[int],
    linearized: bool,
) -> str | None:
    """What the format's header states, if the format is one we read."""
    if kind == "png":
        return _png(head)
    if kind == "jpeg":
        return _jpeg(head)
    if kind == "gif":
        return _gif(head)
    if kind == "pdf":
        return _pdf(head, pages, counts, linearized)
    if kind == "gzip":
        return _gzip(head, tail)
    if kind == "zip":
        return _zip(whole, tail)
    if kind == "elf":
        return _elf(head)
    if kind == "sqlite":
        return _sqlite(head)
    if kind == "riff":
        return _riff(head)
    if kind == "webp":
        return _webp(head)
    return None


def describe_binary(data: bytes, detection: Detection, budget: int) -> str:
    """What a binary body says of itself, within ``budget`` bytes."""
    kind = detection.detail or _binary_format(data[:64])
    pages = counts = None
    linearized = False
    if kind == "pdf":
        pages = len(_PAGE.findall(data))
        counts = _page_counts(data)
        linearized = bool(_LINEARIZED.search(data[:4096]))
    facts = _describe(kind, data[:_KEEP], data[-_KEEP:], data, pages or 0, counts or [], linearized)
    out = Builder(budget)
    out.add_cut(f"binary: {kind}, {len(data):,} bytes; no preview of the content")
    if facts:
        out.add_cut(f"format: {facts}")
    out.add_cut(f"first bytes: {_hex(data[:16])}")
    if len(data) > 16:
        out.add_cut(f"last bytes:  {_hex(data[-16:])}")
    return out.text()


def _decode_stream(payload: bytes) -> _Decoded:
    """Decode base64 ``payload`` a chunk at a time, keeping only what sniffing needs."""
    found = _Decoded()
    carry = b""
    overlap = b""

    def take(decoded: bytes) -> None:
        nonlocal overlap
        if len(found.head) < _KEEP:
            found.head += decoded[: _KEEP - len(found.head)]
        found.tail = (found.tail + decoded)[-_KEEP:]
        window = overlap + decoded
        # A match wholly inside the overlap was counted with the previous chunk.
        found.pages += sum(1 for m in _PAGE.finditer(window) if m.end() > len(overlap))
        found.counts.extend(_page_counts(window))
        if found.size < 4096 and _LINEARIZED.search(window[:4096]):
            found.linearized = True
        overlap = window[-400:]
        found.size += len(decoded)

    for start in range(0, len(payload), _CHUNK):
        chunk = payload[start : start + _CHUNK].translate(None, _SPACES)
        chunk = chunk.replace(b"-", b"+").replace(b"_", b"/")
        clean = chunk.translate(None, _NOT_BASE64)
        bad = len(chunk) - len(clean)
        if bad:
            found.invalid += bad
            chunk = clean
        chunk = carry + chunk
        end = chunk.find(b"=")
        if end >= 0:  # padding: the encoded data ends here
            chunk = chunk[:end]
            carry = b""
        else:
            usable = len(chunk) // 4 * 4
            chunk, carry = chunk[:usable], chunk[usable:]
        if len(chunk) % 4 == 1:
            chunk = chunk[:-1]  # a lone sixth of a byte decodes to nothing
        try:
            take(binascii.a2b_base64(chunk + b"=" * (-len(chunk) % 4)))
        except binascii.Error:
            found.error_at = found.size
            return found
        if end >= 0:
            return found
    if carry:
        if len(carry) % 4 == 1:
            carry = carry[:-1]
        if carry:
            try:
                take(binascii.a2b_base64(carry + b"=" * (-len(carry) % 4)))
            except binascii.Error:
                found.error_at = found.size
    return found


def describe_base64(data: bytes, detection: Detection, budget: int) -> str:
    """What a base64 body (or data URI) decodes to, within ``budget`` bytes; never its text."""
    label = "base64 text"
    declared = None
    payload = data
    trailing = 0
    if detection.kind == "data_uri":
        match = _DATA_URI.match(data)
        if match is None:
            raise ValueError("not a data URI")
        declared = match.group(1).decode("ascii", "replace")
        rest = data[match.end() :]
        body = _PAYLOAD.match(rest)
        payload = rest[: body.end()] if body else b""
        trailing = len(rest) - len(payload)
        label = f"data URI ({declared})"
    lines = payload.count(b"\n") + (0 if payload.endswith(b"\n") or not payload else 1)
    found = _decode_stream(payload)
    kind = _binary_format(found.head[:64]) if found.head else "empty"
    facts = _describe(
        kind, found.head, found.tail, None, found.pages, found.counts, found.linearized
    )
    out = Builder(budget)
    out.add_cut(
        f"{label}: {len(payload):,} bytes of base64 in {lines:,} line{'s' * (lines != 1)}, "
        f"decoding to {found.size:,} bytes; the base64 itself is never shown"
    )
    notes = []
    if found.invalid:
        notes.append(f"{found.invalid:,} characters outside base64 skipped")
    if found.error_at is not None:
        notes.append(f"decoding failed after {found.error_at:,} bytes")
    if trailing:
        notes.append(f"{trailing:,} bytes follow the data URI")
    if notes:
        out.add_cut("note: " + "; ".join(notes))
    mismatch = ""
    if declared and kind not in declared and kind not in ("unknown", "empty"):
        mismatch = f" (the URI declares {declared})"
    out.add_cut(f"decoded type: {kind}{mismatch}")
    if facts:
        out.add_cut(f"format: {facts}")
    if found.head:
        out.add_cut(f"decoded first bytes: {_hex(found.head[:16])}")
    if found.size > 16:
        out.add_cut(f"decoded last bytes:  {_hex(found.tail[-16:])}")
    return out.text()
