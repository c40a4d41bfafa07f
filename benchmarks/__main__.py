"""``python -m benchmarks <command>``: the study commands (``gap``, ``scale``, ``replay``, ``plot``,
``predictor-study``) without the rest of the ``duetto`` CLI — the same code as ``duetto <command>``."""

from __future__ import annotations

import typer

from duetto.commands import studies

app = typer.Typer(
    name="duetto-studies",
    help="duetto's studies: optimality gap, scaling, trace replay, schedule plots, interference prediction.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
studies.register(app)

if __name__ == "__main__":
    app()
