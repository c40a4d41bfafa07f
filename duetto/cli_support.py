"""Shared pieces of the command line: one-line errors, JSON output, progress bars."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from formulation.errors import DuettoInputError, DuettoWarning

REDIRECTED_WIDTH = 220


def _output_width() -> int | None:
    """Output redirected to a file or a pipe is not squeezed into Rich's default 80 columns (tables
    would lose their headers); a terminal, or ``COLUMNS`` in the environment, decides otherwise."""
    stream = sys.stdout
    is_terminal = stream is not None and hasattr(stream, "isatty") and stream.isatty()
    return None if is_terminal or "COLUMNS" in os.environ else REDIRECTED_WIDTH


console = Console(width=_output_width())
error_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INPUT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


def fail(message: str, code: int = EXIT_INPUT_ERROR) -> NoReturn:
    """Print ``error: message`` on one line to stderr and exit with ``code``."""
    # escaped: a message is plain text ("pip install 'duetto[ray]'" must not be read as Rich markup)
    error_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def user_errors(func: F) -> F:
    """Turn a :class:`DuettoInputError` raised by a command into a one-line error and exit code 2, and
    Ctrl-C into ``error: interrupted`` and exit code 130 (no traceback); a :class:`DuettoWarning` is
    printed as one ``warning:`` line on stderr."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings.catch_warnings():
                shown = warnings.showwarning

                def show(message: Any, category: type[Warning], *rest: Any, **more: Any) -> None:
                    # a documented correction of the input: one line, like an error, not Python's format
                    if issubclass(category, DuettoWarning):
                        error_console.print(
                            f"[bold yellow]warning:[/] {escape(str(message))}", highlight=False, soft_wrap=True
                        )
                    else:
                        shown(message, category, *rest, **more)

                warnings.showwarning = show
                return func(*args, **kwargs)
        except DuettoInputError as error:
            fail(str(error))
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def print_json(data: Any) -> None:
    """Print machine-readable JSON on stdout (NaN and inf become null)."""
    sys.stdout.write(json.dumps(_clean(data), indent=1) + "\n")


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields ``advance(n)``. Disabled output when ``enabled`` is false."""
    if not enabled:

        def ignore(n: int = 1) -> None:
            return None

        yield ignore
        return
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console,
        transient=True,
    ) as progress:
        task = progress.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            progress.advance(task, n)

        yield advance
