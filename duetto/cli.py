"""The ``duetto`` console command.

Each group of commands lives in ``duetto/commands/<topic>.py`` and exposes ``register(app)``; this
module only assembles them. Heavy libraries (Pyomo, OR-Tools, Ray) are imported inside the commands
that need them so that ``duetto --help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from duetto.commands import bound, demo, instances, runtime, simulate, solve, studies

app = typer.Typer(
    name="duetto",
    help="Optimization-model scheduling engine for deep-learning training jobs on shared GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help layout: an option's names stay whole at any width (Rich's panels cut
    # "--policy-warm-start" to "--policy-warm-st…" at 80 columns) and the help text wraps beneath
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from duetto import __version__

        typer.echo(f"duetto {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Optimization-model scheduling engine for deep-learning training jobs on shared GPU clusters."""


for module in (demo, instances, solve, bound, simulate, studies, runtime):
    module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
