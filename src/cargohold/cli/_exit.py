"""Exit statuses of the command line, and the one table that maps outcomes and errors to them."""

from __future__ import annotations

import enum

from cargohold._errors import (
    CargoholdError,
    ReadError,
    RejectedError,
    UsageError,
)
from cargohold._records import ReadOutcome


class ExitCode(enum.IntEnum):
    """The exit status of every ``cargohold`` command. Scripts branch on these, never on text."""

    OK = 0
    ERROR = 1
    USAGE = 2
    MISSING = 3
    UNAUTHORIZED = 4
    STALE = 5
    EXPIRED = 6
    OVER_BUDGET = 7
    REJECTED = 8
    CONTEXT_LEAK = 9
    CONTEXT_WINDOW = 10
    CONTEXT_STALE = 11
    CONTEXT_INSUFFICIENT = 12
    CONTEXT_CONFLICT = 13


OUTCOME_EXIT: dict[ReadOutcome, ExitCode] = {
    ReadOutcome.RESOLVED: ExitCode.OK,
    ReadOutcome.MISSING: ExitCode.MISSING,
    ReadOutcome.UNAUTHORIZED: ExitCode.UNAUTHORIZED,
    ReadOutcome.STALE: ExitCode.STALE,
    ReadOutcome.EXPIRED: ExitCode.EXPIRED,
    ReadOutcome.OVER_BUDGET: ExitCode.OVER_BUDGET,
}
"""Read outcome -> exit status: the one table every reading command uses."""

REHYDRATE_EXIT: dict[str, ExitCode] = {
    **{outcome.value: code for outcome, code in OUTCOME_EXIT.items()},
    "unsupported": ExitCode.USAGE,
    "out_of_range": ExitCode.USAGE,
}
"""A read command's outcome (a rehydrate outcome's code) -> exit status: the store's read
outcomes, and what a read of a verified body refuses as a usage mistake (lines or a grep of a
binary body; a range that starts past the end)."""

EXIT_CODES_HELP = """\b
Exit status:
  0  success
  1  other error (the store is unavailable; verify found damage, not mere leftovers)
  2  usage: bad arguments, configuration or reference; a range past the end; lines of binary
  3  missing: no such artifact in this scope
  4  unauthorized: the artifact belongs to another session
  5  stale: the stored bytes no longer match the reference's digest
  6  expired: the artifact's TTL has passed
  7  over budget: the answer is longer than --max-bytes or --budget
  8  rejected: over a limit or quota, a refused sensitivity, a credential under policy reject
  9  context leak: a request carries raw heavy content (guard)
  10 context window: a request does not fit the model's window (guard)
  11 context-stale: a role packet no longer holds against its authority (envelope)
  12 context-insufficient: the authority lacks a fact the role requires (envelope)
  13 context-conflict: the authority contradicts itself about a path the packet rests on"""


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit status of an error that reached the command line."""
    if isinstance(exc, ReadError):
        try:
            return OUTCOME_EXIT[ReadOutcome(exc.outcome)]
        except ValueError:
            return ExitCode.ERROR
    if isinstance(exc, UsageError):
        return ExitCode.USAGE
    if isinstance(exc, RejectedError):
        return ExitCode.REJECTED
    if isinstance(exc, RecursionError):  # an input nested past what a parser recurses
        return ExitCode.USAGE
    if isinstance(exc, CargoholdError):
        # The guard's errors by their stable codes: importing the guard here would load it (and
        # its client wrappers) on every start of the command line.
        by_code = {
            "context_leak": ExitCode.CONTEXT_LEAK,
            "context_window_exceeded": ExitCode.CONTEXT_WINDOW,
        }
        return by_code.get(exc.code, ExitCode.ERROR)
    return ExitCode.ERROR


def error_line(exc: BaseException) -> str:
    """One safe line for stderr.

    cargohold's own messages are written to hold no body, store path or owner identity, so they
    are shown; any other exception is named by its class only, since its text may hold a path.
    """
    if isinstance(exc, CargoholdError):
        text = " ".join(str(exc).split()) or exc.code
        # The one error whose subject is a path the person typed: the message never holds it (a
        # message may reach a model), the line for that person names it beside the message.
        from cargohold.store._local import StoreRootError  # only when the line is needed

        if isinstance(exc, StoreRootError):
            text = f"{text} ({exc.path})"
    elif isinstance(exc, RecursionError):
        # Only input nests that deep (a document of arrays in arrays, thousands of levels); the
        # commands that parse documents say so themselves, this is the net under the rest.
        text = "the input nests too deeply to read (arrays or objects hundreds of levels deep)"
    else:
        text = f"unexpected {type(exc).__name__}; nothing more is shown, as its text may hold paths"
    return f"cargohold: error: {text}"
