"""Optional dependencies: the heavy libraries only one feature needs live in pip extras.

The core install (``pip install duetto``) schedules, solves, simulates, validates, runs the studies
and the local runtime. Each extra adds one feature:

=============  ===================  ==========================================================
extra          import               feature
=============  ===================  ==========================================================
``ray``        ``ray``              ``--backend ray`` (runtime), ``--ray-address`` (studies)
``parquet``    ``pyarrow``          the studies' ``.parquet`` tables (CSV is always written)
``predictor``  ``sklearn``          fitting the interference predictor (``predicted`` variants)
=============  ===================  ==========================================================

``duetto[all]`` installs every extra; ``duetto[dev]`` adds the test and lint tools. A feature whose
extra is missing raises :class:`MissingExtraError` (a :class:`DuettoInputError`, so the command line
prints it on one line with exit code 2) naming the extra to install.
"""

from __future__ import annotations

import importlib.util

from formulation.errors import DuettoInputError

#: extra → (module imported, distribution that provides it)
EXTRAS: dict[str, tuple[str, str]] = {
    "ray": ("ray", "ray[default]"),
    "parquet": ("pyarrow", "pyarrow"),
    "predictor": ("sklearn", "scikit-learn"),
    "fast": ("numba", "numba"),  # optional speed only: without it the numpy pass runs (no error)
}


class MissingExtraError(DuettoInputError):
    """A feature needs an optional dependency that is not installed."""

    def __init__(self, extra: str, feature: str) -> None:
        self.extra = extra
        self.feature = feature
        _, distribution = EXTRAS[extra]
        super().__init__(
            f"{feature} needs {distribution.split('[')[0]}, which is not installed: pip install 'duetto[{extra}]'",
        )


def duetto_extra_missing(extra: str, feature: str) -> MissingExtraError:
    """The error to raise when ``feature`` finds the library of ``extra`` missing."""
    if extra not in EXTRAS:
        raise KeyError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    return MissingExtraError(extra, feature)


def has_extra(extra: str) -> bool:
    """Whether the library of ``extra`` can be imported (without importing it)."""
    module, _ = EXTRAS[extra]
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses the name, a module without a spec
        return False


def require_extra(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` when the library of ``extra`` is not installed.

    Called by ``feature`` just before its own ``import``, so that the user reads which extra to install
    instead of a ``ModuleNotFoundError`` traceback.
    """
    if not has_extra(extra):
        raise duetto_extra_missing(extra, feature)
