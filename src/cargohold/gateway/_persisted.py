"""Claude Code's spill notice: ``<persisted-output>`` becomes the stub of the file it names.

Claude Code (2.1) writes any tool output over about 30 KB to
``~/.claude/projects/<project>/<session>/tool-results/<tool-use-id>.txt`` and sends only::

    <persisted-output>
    Output too large (45.2KB). Full output saved to: /home/ana/.claude/projects/.../x.txt

    Preview (first 2KB):
    ...
    </persisted-output>

so the model gets a 2 KB head. The gateway reads the file it names, only from the configured
tool-results folder (resolved, no symlink anywhere on the path, a regular file, within the store's
``max_artifact_bytes``), and offloads it like any result: the model gets the structure-aware
stub and the read tools. Anything else, or a file that fails a check, is left as it was.
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
MAX_NOTICE = 16 * 1024
"""A notice is its path and a 2 KB preview; anything longer is not one."""

DEFAULT_FOLDER = Path("~/.claude/projects")
"""Claude Code's own folder of projects (each with its sessions' ``tool-results``)."""


def spilled_file(notice: str, folder: Path, max_bytes: int) -> bytes | None:
    """The bytes of the file a ``<persisted-output>`` notice names, or ``None`` when the text
    is no such notice or the file is not one the gateway may read.

    Args:
        notice: A tool result's text.
        folder: The tool-results folder; only files under it (after resolving) are read.
        max_bytes: The largest file read (the store's ``max_artifact_bytes``).
    """
    if len(notice) > MAX_NOTICE or "<persisted-output>" not in notice[:64]:
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
    return data if len(data) <= max_bytes else None
