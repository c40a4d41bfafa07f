"""Loaders that turn the public traces (``shared/data``) into :class:`~formulation.instance.Instance`.

Every loader reads its format as published, converts times to seconds, and builds profiles such that
``Instance.isolated_duration(job)`` is the duration the trace implies (see ``docs/formats.md``).
Common options: ``nodes``, ``gpus_per_node`` (cluster shape; each format has a documented default),
``gpu_memory_gib``, ``capacity``, ``interference`` (replace the default model), ``limit`` (first
``limit`` jobs of the file) and ``name``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.trace_settings import KIND_SETTINGS, check_settings, loader_settings, trace_policy_options
from formulation.traces.common import PathLike
from formulation.traces.gavel import gavel_interference_table, load_gavel, parse_gavel_trace
from formulation.traces.muri import load_muri
from formulation.traces.pollux import PolluxFit, fit_pollux_application, load_pollux, pollux_fit_report
from formulation.traces.shockwave import load_shockwave
from formulation.traces.tiresias import load_tiresias

LOADERS: dict[str, Callable[..., Instance]] = {
    "muri": load_muri,
    "tiresias": load_tiresias,
    "gavel": load_gavel,
    "shockwave": load_shockwave,
    "pollux": load_pollux,
}
TRACE_KINDS: tuple[str, ...] = tuple(LOADERS)


def load_trace(kind: str, path: PathLike, *, settings: str = "authors", **options: Any) -> Instance:
    """Load a trace of format ``kind`` (``muri``, ``tiresias``, ``gavel``, ``shockwave``, ``pollux``).

    Parameters
    ----------
    kind
        The format.
    path
        The trace file.
    settings
        ``"authors"`` (default): the trace's authors' settings (the loaders' defaults,
        :data:`~formulation.trace_settings.KIND_SETTINGS`); ``"duetto"``: duetto's generic defaults
        for the options not given in ``options``. Recorded as ``metadata["settings"]``, which decides
        the policy options :func:`~formulation.trace_settings.trace_policy_options` adds.
    **options
        Passed to the format's loader (``load_<kind>``); an option given here wins over ``settings``.

    Raises
    ------
    DuettoInputError
        Unknown kind, unknown option, or bad input (naming file, row/line and column).
    """
    loader = LOADERS.get(kind)
    if loader is None:
        raise DuettoInputError(f"unknown trace kind '{kind}'; choose one of {', '.join(TRACE_KINDS)}", field="kind")
    chosen = check_settings(settings)
    try:
        instance = loader(path, **(loader_settings(kind, chosen) | options))
    except TypeError as error:
        # an option the loader does not take: a user mistake, not a crash
        if "unexpected keyword argument" in str(error):
            raise DuettoInputError(f"{kind} traces: {error}", field="options") from None
        raise
    return dataclasses.replace(instance, metadata={**instance.metadata, "settings": chosen})


__all__ = [
    "KIND_SETTINGS",
    "LOADERS",
    "TRACE_KINDS",
    "PolluxFit",
    "fit_pollux_application",
    "gavel_interference_table",
    "load_gavel",
    "load_muri",
    "load_pollux",
    "load_shockwave",
    "load_tiresias",
    "load_trace",
    "parse_gavel_trace",
    "pollux_fit_report",
    "trace_policy_options",
]
