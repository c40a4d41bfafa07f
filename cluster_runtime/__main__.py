"""``python -m cluster_runtime daemon|submit|apply|status|cancel|logs|shutdown|profile``.

The same commands as ``duetto <command>``; useful where only the runtime is deployed (and in tests,
which start daemons as real processes this way).
"""

from __future__ import annotations

import typer

from duetto.commands.runtime import register

app = typer.Typer(name="duetto-runtime", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
register(app)

if __name__ == "__main__":
    app()
