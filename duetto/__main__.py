"""``python -m duetto``: the ``duetto`` command."""

from duetto.cli import main

main()
