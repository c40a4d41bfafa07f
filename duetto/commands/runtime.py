"""``duetto daemon | submit | apply | status | cancel | logs | shutdown | profile``: the cluster runtime.

The daemon keeps the desired state and reconciles it with the GPU nodes; the other commands talk to
it over its local API (unix socket ``<state>/duetto.sock`` by default, or ``--address`` with a token).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from duetto.cli_support import console, fail, print_json, user_errors
from formulation.errors import DuettoInputError

StateOption = Annotated[
    Path | None,
    typer.Option("--state", help="state directory (default $DUETTO_STATE or ~/.local/state/duetto)"),
]
AddressOption = Annotated[
    str | None, typer.Option("--address", help="HOST:PORT of a daemon listening on TCP (needs --token-file)")
]
TokenOption = Annotated[Path | None, typer.Option("--token-file", help="file holding the API token (TCP only)")]


def _client(state: Path | None, address: str | None, token_file: Path | None) -> Any:
    from cluster_runtime.api import RuntimeClient
    from cluster_runtime.config import SOCKET_NAME, default_state_dir

    if address is not None:
        if token_file is None:
            raise DuettoInputError("--address needs --token-file (the daemon only serves TCP with a token)")
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise DuettoInputError(f"cannot read token: {error}", source=str(token_file)) from None
        return RuntimeClient(address=address, token=token)
    return RuntimeClient(socket_path=(state or default_state_dir()) / SOCKET_NAME)


def _call(function: Any, *args: Any) -> Any:
    from cluster_runtime.api import DaemonError, DaemonUnavailable

    try:
        return function(*args)
    except DaemonUnavailable as error:
        fail(f"{error}; start one with 'duetto daemon'", code=1)
    except DaemonError as error:  # the daemon's fault, not the request's: one line, exit 1
        fail(" ".join(str(error).split()), code=1)


def _read(path: Path) -> Any:
    from formulation.io import read_json

    return read_json(path)


@user_errors
def daemon(
    backend: Annotated[str, typer.Option("--backend", help="local (this machine) or ray")] = "local",
    state: StateOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="JSON config file (docs/runtime.md)")] = None,
    fake_gpus: Annotated[str | None, typer.Option("--fake-gpus", help="NODESxGPUS fake inventory, e.g. 2x4")] = None,
    inventory: Annotated[Path | None, typer.Option("--inventory", help="inventory JSON (nodes, GPU UUIDs)")] = None,
    gpu_memory_gib: Annotated[float | None, typer.Option(help="memory of each fake GPU, GiB")] = None,
    capacity: Annotated[int | None, typer.Option(help="C: most jobs on one GPU")] = None,
    policy: Annotated[str | None, typer.Option(help="policy asked on each arrival/completion")] = None,
    profiles: Annotated[Path | None, typer.Option("--profiles", help="instance-format JSON of profiles")] = None,
    listen: Annotated[str | None, typer.Option(help="HOST:PORT to serve on TCP (with --token-file)")] = None,
    token_file: TokenOption = None,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (default auto)")] = None,
    ray_fake_gpus: Annotated[bool | None, typer.Option(help="Ray nodes without NVML use fake GPUs")] = None,
    mps: Annotated[str | None, typer.Option(help="MPS: auto, on or off")] = None,
    mps_binary: Annotated[str | None, typer.Option(help="MPS control program")] = None,
    default_thread_percentage: Annotated[int | None, typer.Option(help="MPS default active thread %")] = None,
    reconcile_interval: Annotated[float | None, typer.Option(help="seconds between reconcile passes")] = None,
    stop_grace: Annotated[float | None, typer.Option(help="seconds from SIGTERM to SIGKILL")] = None,
    retry_backoff: Annotated[float | None, typer.Option(help="seconds before a crashed job restarts")] = None,
    max_retries: Annotated[int | None, typer.Option(help="default restarts of a crashing job")] = None,
    debug_crash_after_launches: Annotated[int | None, typer.Option(hidden=True)] = None,
) -> None:
    """Run the runtime daemon: keep the desired state and reconcile it with the GPU nodes."""
    from cluster_runtime.config import load_config
    from cluster_runtime.daemon import run_daemon

    settings = load_config(
        config,
        backend=backend,
        state_dir=state,
        fake_gpus=fake_gpus,
        inventory_file=inventory,
        gpu_memory_gib=gpu_memory_gib,
        capacity=capacity,
        policy=policy,
        profiles_file=profiles,
        listen=listen,
        token_file=token_file,
        ray_address=ray_address,
        ray_fake_gpus=ray_fake_gpus,
        mps_mode=mps,
        mps_binary=mps_binary,
        mps_default_active_thread_percentage=default_thread_percentage,
        reconcile_interval_s=reconcile_interval,
        stop_grace_s=stop_grace,
        retry_backoff_s=retry_backoff,
        default_max_retries=max_retries,
        debug_crash_after_launches=debug_crash_after_launches,
    )
    if settings.backend == "ray":  # before the state directory is touched: nothing half-started
        from formulation.extras import require_extra

        require_extra("ray", "the Ray backend (--backend ray)")
    run_daemon(settings)


@user_errors
def submit(
    job_files: Annotated[list[Path], typer.Argument(help="job spec JSON files (an object or a list of them)")],
    state: StateOption = None,
    address: AddressOption = None,
    token_file: TokenOption = None,
) -> None:
    """Submit jobs to the daemon: every spec of every file, or none of them."""
    from cluster_runtime.spec import job_spec_from_dict

    specs: list[Any] = []
    origin: dict[str, str] = {}
    for path in job_files:
        data = _read(path)
        items = data if isinstance(data, list) else [data]
        if not items:
            raise DuettoInputError("an empty list of job specs", source=str(path))
        for index, spec in enumerate(items):
            where = f"{path}, job {index + 1}" if isinstance(data, list) else str(path)
            workdir = spec.get("workdir") if isinstance(spec, dict) else None
            if isinstance(workdir, str) and workdir and "\0" not in workdir and not Path(workdir).is_absolute():
                # relative to the job file, not to wherever the daemon happens to run (the daemon
                # itself takes absolute paths only)
                spec = {**spec, "workdir": str((path.parent / workdir).resolve())}
            # The spec's own fields are checked here, so that the error names its file; the daemon
            # checks the rest (profiles, fit, ids already submitted) for the whole list at once.
            parsed = job_spec_from_dict(spec, where)
            job_id = parsed.id
            if job_id in origin:
                raise DuettoInputError(f"job '{job_id}' is also in {origin[job_id]}", source=where, field="id")
            origin[job_id] = where
            specs.append(spec)
    answer = _call(_client(state, address, token_file).submit, specs)
    for item in answer["jobs"]:
        console.print(f"submitted {item['job_id']}")


@user_errors
def apply(
    plan_file: Annotated[
        Path, typer.Argument(help="plan JSON {entries: [{job_id, gpus, steps}]}, or a duetto-schedule to replay")
    ],
    state: StateOption = None,
    address: AddressOption = None,
    token_file: TokenOption = None,
) -> None:
    """Apply a plan (the complete set of jobs that should run, where, with how many accumulation steps),
    or replay a computed schedule (the oracle's or a simulated policy's) in its order."""
    client = _client(state, address, token_file)
    try:
        answer = _call(client.apply, _read(plan_file))
    except DuettoInputError as error:
        raise error.located(str(plan_file)) from None
    if "replay" in answer:
        waiting = f"; not submitted yet: {', '.join(answer['not_submitted'])}" if answer["not_submitted"] else ""
        console.print(f"replaying the schedule ({answer['jobs']} job(s)) in order{waiting}", highlight=False)
    else:
        console.print(f"plan {answer['plan_id']} applied ({answer['entries']} job(s))")


@user_errors
def status(
    state: StateOption = None,
    address: AddressOption = None,
    token_file: TokenOption = None,
    job: Annotated[str | None, typer.Option("--job", help="details of one job")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Show jobs, GPUs, MPS daemons and the current plan."""
    client = _client(state, address, token_file)
    if job is not None:
        print_json(_call(client.job, job))
        return
    answer = _call(client.status)
    if as_json:
        print_json(answer)
        return
    from rich.table import Table

    counts = ", ".join(f"{k} {v}" for k, v in sorted(answer["counts"].items())) or "no jobs"
    console.print(
        f"backend [bold]{answer['backend']}[/], policy {answer['policy'] or '-'}, capacity {answer['capacity']}, "
        f"{'fake ' if answer['fake_gpus'] else ''}GPUs; {counts}; {answer['reconciles']} reconcile passes",
        highlight=False,
    )
    table = Table("job", "state", "progress", "GPUs", "steps", "attempts", "pids", "last error")
    for item in answer["jobs"]:
        launch = item["launch"] or {}
        table.add_row(
            item["id"],
            item["state"],
            f"{item['progress']:g}/{item['iterations']}",
            ",".join(str(g) for g in (launch.get("gpus") or item["planned_gpus"] or [])),
            str(launch.get("steps") or item["planned_steps"] or ""),
            f"{item['attempts']}/{item['max_retries']}",
            ",".join(str(p) for p in launch.get("pids", [])),
            item["last_error"] or "",
        )
    console.print(table)
    nodes = Table("node", "name", "MPS", "GPU: jobs")
    for node in answer["nodes"]:
        mps = node["mps"] or {}
        state_text = "off" if not mps.get("enabled") else ("up" if mps.get("alive") else "DOWN")
        nodes.add_row(
            str(node["index"]),
            node["name"],
            f"{state_text} (pid {mps.get('pid')})" if mps.get("enabled") else state_text,
            "  ".join(f"{g['id']}: {','.join(g['jobs']) or '-'}" for g in node["gpus"]),
        )
    console.print(nodes)


@user_errors
def cancel(
    job_id: Annotated[str, typer.Argument(help="job to cancel")],
    state: StateOption = None,
    address: AddressOption = None,
    token_file: TokenOption = None,
) -> None:
    """Cancel a job (it leaves the plan; its processes are stopped)."""
    answer = _call(_client(state, address, token_file).cancel, job_id)
    console.print(f"{answer['job_id']}: {answer['state']}")


@user_errors
def logs(
    job_id: Annotated[str, typer.Argument(help="job whose latest launch to show")],
    stderr: Annotated[bool, typer.Option("--stderr", help="standard error instead of standard output")] = False,
    tail: Annotated[int, typer.Option(help="last bytes to show")] = 65536,
    rank: Annotated[int, typer.Option(help="node rank of a multi-node gang")] = 0,
    state: StateOption = None,
    address: AddressOption = None,
    token_file: TokenOption = None,
) -> None:
    """Print the captured output of a job's latest launch."""
    text = _call(_client(state, address, token_file).logs, job_id, "stderr" if stderr else "stdout", tail, rank)
    typer.echo(text, nl=False)


@user_errors
def shutdown(
    leave_running: Annotated[
        bool,
        typer.Option("--leave-running", help="keep jobs and MPS running; the next daemon re-adopts them"),
    ] = False,
    state: StateOption = None,
    address: AddressOption = None,
    token_file: TokenOption = None,
) -> None:
    """Stop the daemon (by default stopping its jobs, which resume when it restarts, and quitting MPS)."""
    _call(_client(state, address, token_file).shutdown, leave_running)
    console.print("daemon stopping")


@user_errors
def profile(
    job_file: Annotated[Path, typer.Argument(help="job spec JSON of the job to profile")],
    partner: Annotated[Path | None, typer.Option("--partner", help="job spec to measure interference with")] = None,
    seconds: Annotated[float, typer.Option(help="T_prof: seconds of each bounded run")] = 5.0,
    steps: Annotated[str | None, typer.Option(help="accumulation steps to time, e.g. 1,2,4")] = None,
    gpu: Annotated[int, typer.Option(help="flat id of the (idle) GPU to profile on")] = 0,
    state: StateOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="daemon config file")] = None,
    fake_gpus: Annotated[str | None, typer.Option("--fake-gpus", help="NODESxGPUS fake inventory")] = None,
    inventory: Annotated[Path | None, typer.Option("--inventory", help="inventory JSON")] = None,
    profiles: Annotated[Path | None, typer.Option("--profiles", help="instance-format JSON of profiles")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="also write the measurements as JSON here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Profile a job on this node (alone and next to a partner), store its fitted profile and ratios."""
    from cluster_runtime.config import load_config
    from cluster_runtime.profiler import profile_from_files

    settings = load_config(
        config, state_dir=state, fake_gpus=fake_gpus, inventory_file=inventory, profiles_file=profiles
    )
    steps_list = None
    if steps:
        try:
            steps_list = [int(s) for s in steps.split(",") if s.strip()]
        except ValueError:
            raise DuettoInputError(f"expected integers separated by commas, got {steps!r}", field="steps") from None
    report = profile_from_files(settings, job_file, partner, seconds, steps_list, gpu)
    data = report.to_dict()
    if out is not None:
        from formulation.io import write_json_atomic

        write_json_atomic(out, data)
    if as_json:
        print_json(data)
        return
    fitted = report.profile
    console.print(
        f"profile '{fitted.name}': compute_alpha {fitted.compute_alpha:.5g} s, compute_beta "
        f"{fitted.compute_beta:.5g} s/sample (fit residual {report.fit_residual:.1%})",
        highlight=False,
    )
    for m in report.alone + report.together:
        with_whom = f" next to {m.partner}" if m.partner else " alone"
        console.print(
            f"  {m.job_id}{with_whom}, {m.steps} step(s): {m.iteration_time:.4g} s/iteration", highlight=False
        )
    for (victim, other), xi in report.ratios.items():
        console.print(f"  xi({victim} | {other}) = {xi:.3f}", highlight=False)
    console.print(f"stored in {settings.db_path}")


def register(app: typer.Typer) -> None:
    """Add the runtime commands to ``app``."""
    app.command("daemon")(daemon)
    app.command("submit")(submit)
    app.command("apply")(apply)
    app.command("status")(status)
    app.command("cancel")(cancel)
    app.command("logs")(logs)
    app.command("shutdown")(shutdown)
    app.command("profile")(profile)
