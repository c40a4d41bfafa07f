"""Loader options shared by the commands that read public traces (``import``, ``simulate --trace``,
``replay``): each option is checked against the trace kind here, once, so the three commands agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from formulation.errors import DuettoInputError

#: Which trace kinds take each command-line loader option (flag → (loader keyword, kinds)).
KIND_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "--profiles": ("profiles_dir", ("pollux",)),
    "--duration-from": ("duration_from", ("muri",)),
    "--semantics": ("semantics", ("muri",)),
}
DURATION_FROM_HELP = (
    "muri: isolated duration from the trace's 'duration' column (default) or 'iterations' × iteration_time "
    "(how Muri's simulator and testbed scripts run a job)"
)

SEMANTICS_HELP = (
    "muri: progress rule of the instance, 'muri' (default: Muri's simulator's stretched group periods and "
    "start overheads at events) or 'duetto' (SPEC.md's); docs/model.md, 'Progress rules'"
)


def trace_loader_options(
    kind: str, *, profiles: Path | None = None, duration_from: str | None = None, semantics: str | None = None
) -> dict[str, Any]:
    """The loader keywords for trace ``kind`` from the kind-specific command-line options.

    Parameters
    ----------
    kind
        Trace format (``pollux``, ``muri``, ...).
    profiles
        ``--profiles DIR``: the Pollux application profiles folder.
    duration_from
        ``--duration-from``: ``duration`` or ``iterations`` (Muri traces).
    semantics
        ``--semantics``: ``muri`` or ``duetto`` (Muri traces: the instance's progress rule).

    Returns
    -------
    dict
        Keyword options for :func:`formulation.traces.load_trace` (plain strings: they go into study
        task keys, which are JSON).

    Raises
    ------
    DuettoInputError
        An option the kind does not take, or a folder that does not exist.
    """
    given: dict[str, Any] = {"--profiles": profiles, "--duration-from": duration_from, "--semantics": semantics}
    options: dict[str, Any] = {}
    for flag, value in given.items():
        if value is None:
            continue
        keyword, kinds = KIND_OPTIONS[flag]
        if kind not in kinds:
            raise DuettoInputError(f"{flag} applies to {', '.join(kinds)} traces only, not {kind}", field=flag)
        if flag == "--profiles" and not Path(value).is_dir():
            raise DuettoInputError("no such folder", source=str(value), field=flag)
        if flag == "--duration-from" and value not in ("duration", "iterations"):
            raise DuettoInputError(f"must be 'duration' or 'iterations', got {value!r}", field=flag)
        if flag == "--semantics" and value not in ("muri", "duetto"):
            raise DuettoInputError(f"must be 'muri' or 'duetto', got {value!r}", field=flag)
        options[keyword] = str(value)
    return options
