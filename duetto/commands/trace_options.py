"""Loader options shared by the commands that read public traces (``import``, ``simulate --trace``,
``replay``): each option is declared once here (as a typer annotation) and checked against the trace kind
once, so the three commands offer and check the same options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from formulation.errors import DuettoInputError
from formulation.trace_settings import SETTINGS

#: Which trace kinds take each command-line loader option: flag → (loader keyword, kinds, allowed values
#: per kind or ``None`` for a path).
KIND_OPTIONS: dict[str, tuple[str, tuple[str, ...], dict[str, tuple[str, ...]] | None]] = {
    "--profiles": ("profiles_dir", ("pollux",), None),
    "--duration-from": (
        "duration_from",
        ("muri", "shockwave"),
        {"muri": ("iterations", "duration"), "shockwave": ("trace", "steps")},
    ),
    "--worker-type": (
        "worker_type",
        ("gavel", "shockwave"),
        {k: ("v100", "p100", "k80") for k in ("gavel", "shockwave")},
    ),
    "--throughputs": ("throughputs", ("gavel", "shockwave"), None),
    "--missing-throughput": (
        "missing_throughput",
        ("gavel", "shockwave"),
        {k: ("scale", "error") for k in ("gavel", "shockwave")},
    ),
    "--cluster-spec": ("cluster_spec", ("muri", "tiresias"), None),
    "--memory": ("memory", ("pollux",), {"pollux": ("max_local_bsz", "none")}),
    "--semantics": ("semantics", ("muri",), {"muri": ("duetto", "muri")}),
    "--experiment": ("experiment", ("muri",), {"muri": ("auto", "simulation", "testbed")}),
}

SETTINGS_HELP = (
    "authors (default): the trace's authors' settings (muri: C=4, runtime = iterations × iteration_time, "
    "Muri's own policy side for muri-s/l, the progress rule of the trace's experiment (--experiment); "
    "tiresias: C=1); duetto: duetto's generic defaults (C=2, muri: the 'duration' column, duetto's Muri "
    "policy side, SPEC.md's progress rule). docs/formats.md lists each with its source"
)
DURATION_FROM_HELP = (
    "muri: runtime from 'iterations' × iteration_time (default, the authors' scripts) or the 'duration' column; "
    "shockwave: the trace's 'trace' duration (default) or 'steps' / throughput"
)

# One annotation per option, used by every command that reads traces.
SettingsOption = Annotated[str | None, typer.Option("--settings", help=SETTINGS_HELP)]
ProfilesOption = Annotated[
    Path | None,
    typer.Option(
        "--profiles", help="pollux: folder of <application>/ profiles (default: beside the workload, else shared)"
    ),
]
DurationFromOption = Annotated[str | None, typer.Option("--duration-from", help=DURATION_FROM_HELP)]
WorkerTypeOption = Annotated[
    str | None, typer.Option("--worker-type", help="gavel, shockwave: GPU type of the throughputs (default v100)")
]
ThroughputsOption = Annotated[
    Path | None,
    typer.Option(
        "--throughputs",
        help="gavel, shockwave: throughput JSON (default: beside the trace, one folder up, else the shared copy)",
    ),
]
MissingThroughputOption = Annotated[
    str | None,
    typer.Option(
        "--missing-throughput",
        help="gavel, shockwave: a job type × scale factor never measured: 'scale' the largest measured one "
        "linearly (gavel's default) or 'error' (shockwave's default)",
    ),
]
ClusterSpecOption = Annotated[
    Path | None, typer.Option("--cluster-spec", help="muri, tiresias: the cluster spec CSV (num_switch,...)")
]
SEMANTICS_HELP = (
    "muri: the instance's progress rule, 'muri' (Muri's simulator's: stretched group periods and start "
    "overheads at events; default for the simulation traces) or 'duetto' (SPEC.md's; default for the testbed "
    "and under --settings duetto); wins over --experiment. docs/model.md, 'Progress rules'"
)
SemanticsOption = Annotated[str | None, typer.Option("--semantics", help=SEMANTICS_HELP)]
EXPERIMENT_HELP = (
    "muri: which of the authors' experiments the trace is, 'simulation' (Muri's simulator: Muri's progress "
    "rule) or 'testbed' (their real cluster: SPEC.md's rule); default 'auto': testbed if the file name "
    "contains 'testbed' or 'cluster_trace' or it lies in a cluster_exp folder, else simulation"
)
ExperimentOption = Annotated[str | None, typer.Option("--experiment", help=EXPERIMENT_HELP)]
MemoryOption = Annotated[
    str | None,
    typer.Option("--memory", help="pollux: per-GPU memory model 'max_local_bsz' (default) or 'none' (0 GiB)"),
]


def trace_loader_options(
    kind: str,
    *,
    profiles: Path | None = None,
    duration_from: str | None = None,
    worker_type: str | None = None,
    throughputs: Path | None = None,
    missing_throughput: str | None = None,
    cluster_spec: Path | None = None,
    memory: str | None = None,
    semantics: str | None = None,
    experiment: str | None = None,
    settings: str | None = None,
) -> dict[str, Any]:
    """The loader keywords for trace ``kind`` from the kind-specific command-line options.

    Parameters
    ----------
    kind
        Trace format (``pollux``, ``muri``, ...).
    profiles, duration_from, worker_type, throughputs, missing_throughput, cluster_spec, memory, semantics, experiment
        The options of :data:`KIND_OPTIONS` (``None``: not given, the loader's default).
    settings
        ``--settings``: ``authors`` or ``duetto`` (any kind; passed as ``settings`` to
        :func:`formulation.traces.load_trace`).

    Returns
    -------
    dict
        Keyword options for :func:`formulation.traces.load_trace` (plain strings: they go into study
        task keys, which are JSON).

    Raises
    ------
    DuettoInputError
        An option the kind does not take, a value the kind does not know, or a path that does not exist.
    """
    given: dict[str, Any] = {
        "--profiles": profiles,
        "--duration-from": duration_from,
        "--worker-type": worker_type,
        "--throughputs": throughputs,
        "--missing-throughput": missing_throughput,
        "--cluster-spec": cluster_spec,
        "--memory": memory,
        "--semantics": semantics,
        "--experiment": experiment,
    }
    options: dict[str, Any] = {}
    if settings is not None:
        if settings not in SETTINGS:
            raise DuettoInputError(f"must be one of {', '.join(SETTINGS)}, got {settings!r}", field="--settings")
        options["settings"] = settings
    for flag, value in given.items():
        if value is None:
            continue
        keyword, kinds, allowed = KIND_OPTIONS[flag]
        if kind not in kinds:
            raise DuettoInputError(f"{flag} applies to {', '.join(kinds)} traces only, not {kind}", field=flag)
        if allowed is None:
            path = Path(value)
            if flag == "--profiles" and not path.is_dir():
                raise DuettoInputError("no such folder", source=str(value), field=flag)
            if flag != "--profiles" and not path.is_file():
                raise DuettoInputError("no such file", source=str(value), field=flag)
        elif value not in allowed[kind]:
            raise DuettoInputError(
                f"{kind} traces take {' or '.join(repr(a) for a in allowed[kind])}, got {value!r}", field=flag
            )
        options[keyword] = str(value)
    return options
