"""Claude Code's spill notice: ``<persisted-output>`` becomes the stub of the file it names.

Claude Code (2.1) writes any tool output over about 30 KB to
``~/.claude/projects/<project>/<session>/tool-results/<tool-use-id>.txt`` and sends only::

    <persisted-output>
    Output too large (45.2KB). Full output saved to: /home/ana/.claude/projects/.../x.txt

    Preview (first 2KB):
    ...
    </persisted-output>

so the model gets a 2 KB head. The gateway reads the file it names only when it is such a spill
of the very result that carries the notice: ``<folder>/<project>/<session>/tool-results/`` and
named after the result's tool-use id (``<id>.txt``, or ``<id>.json``) or, for a shell's spill,
which Claude Code 2.1 names by its own task id (``bw16valb6.txt``), opening with the preview the
notice carries; resolved, no symlink
anywhere on the path, a regular file, within the store's ``max_artifact_bytes``. It offloads it
like any result: the model gets the structure-aware stub and the read tools. Anything else (a
notice naming another file under the folder, a file that fails a check) is left as it was.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

_BLOCK = re.compile(
    r"\A\s*<persisted-output>\s*\n[^\n]*?Full output saved to: (?P<path>[^\n]+?)\s*\n"
    r".*</persisted-output>\s*\Z",
    re.DOTALL,
)
_PREVIEW = re.compile(
    r"\nPreview \(first [^)\n]*\):\n(?P<preview>.*?)(?:\n\.\.\.)?\n?</persisted-output>\s*\Z",
    re.DOTALL,
)
MAX_NOTICE = 16 * 1024
"""A notice is its path and a 2 KB preview; anything longer is not one."""

DEFAULT_FOLDER = Path("~/.claude/projects")
"""Claude Code's own folder of projects (each with its sessions' ``tool-results``)."""

_SUFFIXES = (".txt", ".json")  # what Claude Code names a spilled text or structured output


def spilled_file(notice: str, folder: Path, max_bytes: int, call_id: str | None) -> bytes | None:
    """The bytes of the file a ``<persisted-output>`` notice names, or ``None`` when the text
    is no such notice or the file is not one the gateway may read.

    Args:
        notice: A tool result's text.
        folder: Claude Code's projects folder; only its ``<project>/<session>/tool-results``
            files (after resolving) are read.
        max_bytes: The largest file read (the store's ``max_artifact_bytes``).
        call_id: The tool-use id of the result carrying the notice; only the file named after
            it is read (``None``: none is).
    """
    if len(notice) > MAX_NOTICE or "<persisted-output>" not in notice[:64] or not call_id:
        return None
    found = _BLOCK.match(notice)
    if found is None:
        return None
    named = found.group("path")
    if not os.path.isabs(named):
        return None
    try:
        root = folder.expanduser().resolve(strict=True)
        path = Path(os.path.normpath(named))
        # Resolving changes nothing only when no component of the path is a symlink.
        if path.resolve(strict=True) != path or not path.is_relative_to(root):
            return None
        parts = path.relative_to(root).parts
        # <project>/<session>/tool-results/<id>.txt: this result's own spill, no other file.
        if len(parts) != 4 or parts[2] != "tool-results" or path.suffix not in _SUFFIXES:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except (OSError, RuntimeError, ValueError):
        return None
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode) or facts.st_size > max_bytes:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return None
    # Tied to this result: named after its tool-use id, or (a shell's spill, which Claude Code
    # 2.1 names by its own task id) opening with the preview the notice carries, so a notice
    # cannot pull in a file whose head it does not already hold.
    if path.stem != call_id and not _opens_with_preview(notice, data):
        return None
    return data


def _opens_with_preview(notice: str, data: bytes) -> bool:
    """Whether the file's bytes begin with the notice's non-empty preview."""
    found = _PREVIEW.search(notice)
    if found is None:
        return False
    preview = found.group("preview").rstrip("\n")
    return bool(preview) and data.startswith(preview.encode("utf-8", "surrogatepass"))
