"""The ``cargohold`` command line: store plumbing (put, cat, show, ls, du, gc, verify) and demo.

Run ``cargohold --help`` for the commands and the exit status table.
"""

from cargohold.cli._app import cli, main
from cargohold.cli._exit import OUTCOME_EXIT, ExitCode

__all__ = ["OUTCOME_EXIT", "ExitCode", "cli", "main"]
