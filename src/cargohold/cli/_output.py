"""Writing what an artifact holds to stdout: its exact bytes into a pipe, escaped on a terminal.

``click.echo`` strips ANSI escape sequences whenever stdout is not a terminal, so text echoed into
a pipe or a file is not the stored bytes (and a recovered segment's SHA-256 no longer matches). On
a terminal the opposite danger holds: an artifact is a tool's output, possibly hostile, and its
control sequences would run there (set the window title, write the clipboard with OSC 52, move the
cursor to hide lines). So every command that prints an artifact's bytes goes through here:

* stdout is not a terminal: the bytes are written to the binary stdout, exactly as they are;
* stdout is a terminal: C0 controls other than newline and tab (a carriage return only when it
  ends a CRLF line), DEL and the C1 controls are shown as ``\\xNN``, as are bytes that are not
  UTF-8. Nothing the artifact holds is executed; redirect to a file for the exact bytes.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
"""What a terminal would act on: C0 but newline, tab and CRLF's carriage return; DEL; C1."""
_JSON_UNSAFE = re.compile("[\x7f-\x9f]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw (it escapes C0 itself): DEL and C1."""


def is_terminal(stream: IO[Any]) -> bool:
    """Whether ``stream`` is a terminal (a closed or detached stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def escape_controls(text: str) -> str:
    """``text`` with every control character a terminal would act on shown as ``\\xNN``."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def write_bytes(data: bytes, *, stream: IO[Any] | None = None) -> None:
    """Write ``data`` to stdout: exactly into a pipe or file, escaped on a terminal.

    Args:
        data: The bytes to write.
        stream: The text stream to write to (default: ``sys.stdout``, as click replaces it).
    """
    out = sys.stdout if stream is None else stream
    if is_terminal(out):
        shown = escape_controls(data.decode("utf-8", "backslashreplace"))
        # The terminal's own encoding, with anything it cannot show escaped: a UTF-8 byte in
        # 0x80-0x9f sent to a Latin-1 terminal would be a C1 control there.
        encoding = getattr(out, "encoding", None) or "utf-8"
        data = shown.encode(encoding, "backslashreplace")
    out.flush()  # anything already written as text goes first
    binary = getattr(out, "buffer", None)
    if binary is None:  # a text-only stream (some test captures): the same bytes as text
        out.write(data.decode("utf-8", "surrogateescape"))
        out.flush()
        return
    binary.write(data)
    binary.flush()


def write_text(text: str, *, nl: bool = True, stream: IO[Any] | None = None) -> None:
    """Write ``text`` as UTF-8 (a newline after it with ``nl``), as :func:`write_bytes` does."""
    try:
        data = text.encode("utf-8", "surrogateescape")  # bytes a decode escaped come back as such
    except UnicodeEncodeError:  # a lone surrogate no decode made: shown, never a traceback
        data = text.encode("utf-8", "backslashreplace")
    write_bytes(data + b"\n" if nl else data, stream=stream)


def json_text(value: object) -> str:
    """``value`` as indented JSON, non-ASCII text kept, and DEL and C1 controls escaped.

    The escape is JSON's own (``\\u009b``), so the document means the same; but no terminal
    reads a C1 control (U+009B is a one-character CSI to some) out of it.
    """
    import json  # only for --json: `cat` and `put` do not pay for it at start-up

    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
