"""Where the shared public data lives."""

from __future__ import annotations

import os
from pathlib import Path


def shared_data_dir() -> Path:
    """The public traces folder: ``$DUETTO_SHARED_DATA`` or ``../shared/data`` next to the repository."""
    env = os.environ.get("DUETTO_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"
