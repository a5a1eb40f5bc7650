"""The run report: where the context went, from decision events only.

:func:`build_report` aggregates events (``DecisionEvent.as_dict()``, or the lines of the
JSON-lines events log) into a bounded :class:`RunReport`; :func:`render_html` draws it as one
self-contained page (inline SVG, no script, no network) and :func:`render_terminal` as rich
tables. ``cargohold report`` is the command. Events hold no body, path, owner or exception
text, so neither does the report.
"""

from cargohold.report._model import (
    AgentFigures,
    ArtifactFigures,
    RequestFigures,
    RunReport,
    Stop,
    ToolFigures,
    build_report,
)
from cargohold.report._render import SECTIONS, render_html, render_terminal

__all__ = [
    "SECTIONS",
    "AgentFigures",
    "ArtifactFigures",
    "RequestFigures",
    "RunReport",
    "Stop",
    "ToolFigures",
    "build_report",
    "render_html",
    "render_terminal",
]
