"""Errors raised for bad user input.

Every error a user can cause derives from :class:`DuettoInputError`; the CLI turns it into a one-line
message and exit code 2, never a traceback.
"""

from __future__ import annotations


class DuettoInputError(ValueError):
    """Bad user input: a file, field or value that breaks the problem semantics.

    Parameters
    ----------
    message
        What is wrong, in plain words.
    source
        Where it is: a file path, a job id, a CSV row (``"trace.csv, row 12"``); optional.
    field
        The field or column concerned; optional.
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None) -> None:
        self.message = message
        self.source = source
        self.field = field
        super().__init__(self.render())

    def render(self) -> str:
        where = ", ".join(part for part in (self.source, f"field '{self.field}'" if self.field else None) if part)
        return f"{where}: {self.message}" if where else self.message

    def located(self, source: str) -> DuettoInputError:
        """Return the same error with ``source`` prefixed to its location (e.g. the file it came from)."""
        inner = f"{source}, {self.source}" if self.source else source
        return DuettoInputError(self.message, source=inner, field=self.field)


class InfeasibleInstanceError(DuettoInputError):
    """An instance that no schedule can serve (a job larger than the cluster, memory no placement fits)."""


class DuettoWarning(UserWarning):
    """Input that was accepted after a documented correction (e.g. a measured interference ratio below 1
    clipped to 1); the CLI prints it as one ``warning:`` line."""
