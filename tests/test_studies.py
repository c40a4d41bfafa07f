"""Smoke versions of the studies (benchmarks/, duetto/commands/studies.py): tiny sizes, real oracle, real
simulator. They check the outputs' columns, that every schedule was validated, that the gap is >= 0
whenever the optimum is proven, and that a rerun resumes (skips finished rows)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from benchmarks import runner
from benchmarks.gap import GapStudy, add_gaps, run_gap_study
from benchmarks.replay import ReplayStudy, interference_from_spec, paper_table, run_replay
from benchmarks.runner import RowStore
from benchmarks.scale import ScaleStudy, run_scale_study
from cluster_runtime import procs
from duetto.commands import studies
from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir
from heuristics.registry import make_policy, policy_names

ROOT = Path(__file__).resolve().parent.parent
DATA = shared_data_dir()
POLLUX = DATA / "pollux" / "workloads-1.5" / "workload-1.csv"
GAVEL_TRACE = DATA / "gavel" / "msr_seed0" / "e13805.trace"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not available")

GAP_COLUMNS = {
    "instance",
    "n",
    "nodes",
    "gpus_per_node",
    "gpus",
    "arrivals",
    "load",
    "xi_low",
    "xi_high",
    "seed",
    "slot",
    "method",
    "method_kind",
    "preemptive",
    "status",
    "proven_optimal",
    "objective",
    "bound",
    "solver_gap",
    "validated",
    "violations",
    "wall_seconds",
    "build_seconds",
    "solve_seconds",
    "continuous_objective",
    "continuous_validated",
    "jct_avg",
    "makespan",
    "opt_proven",
    "opt_objective",
    "best_bound",
    "reference",
    "gap_kind",
    "gap",
    "best_known",
    "gap_to_best",
}

cli = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    studies.register(app)
    return app


def test_row_store_resumes_and_ignores_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    store = RowStore(path)
    store.add("a", [{"x": 1.0, "y": math.nan}])
    store.add("b", [{"x": 2.0}, {"x": 3.0}])
    with path.open("a") as handle:
        handle.write('{"key": "c", "rows": [{"x"')  # an interrupted write
    again = RowStore(path)
    assert again.keys() == ["a", "b"]
    assert "c" not in again
    assert [r["x"] for r in again.rows()] == [1.0, 2.0, 3.0]
    assert again.rows(["a"])[0]["y"] is None  # NaN is stored as null
    assert again.discard(["a", "zzz"]) == 1
    assert RowStore(path).keys() == ["b"]


@pytest.fixture(scope="module")
def gap_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gap")


def test_gap_smoke(gap_dir: Path) -> None:
    """Every policy and both solvers on two 4-job instances: validated schedules, gap >= 0 against a
    proven optimum, and a rerun runs nothing."""
    tmp_path = gap_dir
    policies = tuple(policy_names())
    study = GapStudy(
        sizes=(4,),
        clusters=((1, 4),),
        arrivals=("zero", "poisson"),
        seeds=(0,),
        policies=policies,
        solvers=("cpsat", "highs"),
        time_limit=30.0,
        solver_time_limits={"highs": 3.0},
    )
    outcome = run_gap_study(study, tmp_path, workers=2, progress=False)
    assert not outcome.run.failed
    frame = outcome.rows
    assert set(frame.columns) >= GAP_COLUMNS
    assert len(frame) == 2 * (2 + len(policies))  # one row per instance × method
    ran = frame[frame["status"] != "skipped"]
    assert ran["validated"].astype(bool).all(), ran.loc[~ran["validated"].astype(bool), ["method", "message"]]
    assert ran["continuous_validated"].astype(bool).all()
    # 4 jobs: CP-SAT proves optimality well within the limit
    oracle = frame[frame["method"] == "oracle:cpsat"]
    assert oracle["proven_optimal"].all()
    assert (frame["gap_kind"] == "optimum").all()
    proven = frame[frame["opt_proven"] & frame["gap"].notna()]
    non_preemptive = proven[~proven["preemptive"].astype(bool)]
    assert (non_preemptive["gap"] >= 0).all(), non_preemptive[["method", "gap"]]
    # the oracle's own gap is 0; the model objective agrees with the validator's (the integer model is
    # conservative: the validator never finds a schedule worse than the model claims)
    assert (oracle["gap"] == 0).all()
    assert (oracle["objective"] <= oracle["model_objective"] * (1 + 1e-9)).all()
    # a policy's gap is real: at least one policy is strictly worse than the optimum somewhere
    assert (non_preemptive[non_preemptive["method_kind"] == "policy"]["gap"] > 0).any()
    for name in ("gap.csv", "gap.parquet", "summary.csv", "gap_boxplot.png", "gap_vs_n.png"):
        assert (tmp_path / name).is_file()
    tidy = pd.read_parquet(tmp_path / "gap.parquet")
    assert len(tidy) == len(frame)
    summary = outcome.summary
    assert {"method", "n", "gap_median", "gap_p95", "gap_max", "bound_gap_median", "proven_fraction"} <= set(
        summary.columns
    )
    # resume: nothing left to run, same table
    again = run_gap_study(study, tmp_path, workers=2, progress=False, figures=False)
    assert again.run.ran == 0 and again.run.skipped == len(frame)
    pd.testing.assert_frame_equal(again.rows.reset_index(drop=True), frame.reset_index(drop=True))


def test_add_gaps_marks_bound_gaps() -> None:
    """Without a proof the gap is measured to the best bound and marked as such."""
    base = {"instance": "i", "validated": True, "continuous_validated": True, "continuous_objective": 1.0}
    frame = pd.DataFrame(
        [
            {
                **base,
                "method": "oracle:cpsat",
                "method_kind": "oracle",
                "proven_optimal": False,
                "objective": 110.0,
                "bound": 90.0,
            },
            {
                **base,
                "method": "oracle:highs",
                "method_kind": "oracle",
                "proven_optimal": False,
                "objective": 120.0,
                "bound": 100.0,
            },
            {
                **base,
                "method": "sjf",
                "method_kind": "policy",
                "proven_optimal": False,
                "objective": 125.0,
                "bound": math.nan,
            },
        ]
    )
    out = add_gaps(frame)
    assert (out["gap_kind"] == "bound").all()
    assert out["reference"].tolist() == [100.0, 100.0, 100.0]  # the best bound of either solver
    assert out["gap"].tolist() == pytest.approx([0.10, 0.20, 0.25])
    assert out["gap_to_best"].tolist() == pytest.approx([0.0, 120 / 110 - 1, 125 / 110 - 1])


def test_gap_cli_and_errors(gap_dir: Path, tmp_path: Path) -> None:
    """The CLI on a subset of the smoke study's tasks, in its folder: everything is resumed (no solve),
    then one policy is refreshed (recomputed, same numbers)."""
    app = _app()
    args = [
        "gap",
        "--sizes",
        "4",
        "--cluster",
        "1x4",
        "--arrivals",
        "zero",
        "--arrivals",
        "poisson",
        "--seeds",
        "1",
        "--policy",
        "sjf",
        "--policy",
        "sjf-bsbf",
        "--solver",
        "cpsat",
        "--solver",
        "highs",
        "--time-limit",
        "30",
        "--solver-time-limit",
        "highs=3",
        "--out",
        str(gap_dir),
        "--workers",
        "1",
        "--no-progress",
    ]
    result = cli.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    methods = {row["method"] for row in data["summary"]}
    assert methods == {"oracle:cpsat", "oracle:highs", "sjf", "sjf-bsbf"}
    assert all(row["gap_median"] >= 0 for row in data["summary"])
    refreshed = cli.invoke(app, [*args, "--refresh", "sjf"])
    assert refreshed.exit_code == 0, refreshed.output
    assert "2 tasks run, 6 already done" in refreshed.output
    again = json.loads(cli.invoke(app, [*args, "--json"]).output)

    def gaps(summary: list[dict]) -> list[tuple]:
        return [(row["method"], row["gap_median"], row["gap_max"]) for row in summary]

    assert gaps(again["summary"]) == gaps(data["summary"])  # recomputed, same numbers
    bad = cli.invoke(app, ["gap", "--policy", "no-such-policy", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2
    bad = cli.invoke(app, ["gap", "--cluster", "four", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2
    # Solver names are checked before any task runs: nothing is written.
    bad = cli.invoke(app, ["gap", "--solver", "nope", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "unknown solver 'nope'" in bad.output, bad.output
    bad = cli.invoke(app, ["gap", "--solver-time-limit", "highs=5", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "'highs' is not one of the study's solvers (cpsat)" in bad.output, bad.output
    bad = cli.invoke(app, ["scale", "--solver", "pyomo:", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2, bad.output
    # So are the instance family's arguments (before, every task failed on them and the study exited 1)
    for study, option, value, message in [
        ("gap", "--xi-range", "2,1", "field 'xi_range': needs finite >= 1 bounds with low <= high"),
        ("gap", "--load", "0", "field 'load': must be a finite number > 0"),
        ("gap", "--target-slots", "0", "field 'target_slots': must be >= 1"),
        ("scale", "--load", "-1", "field 'load': must be a finite number > 0"),
        ("scale", "--jobs-per-gpu", "0", "field 'jobs_per_gpu': must be > 0"),
    ]:
        bad = cli.invoke(app, [study, option, value, "--out", str(tmp_path / "x"), "--no-progress"])
        assert bad.exit_code == 2 and message in bad.output, (study, option, bad.output)
    assert not (tmp_path / "x").exists()
    # an output place that cannot be written is found before any task runs (was a traceback)
    (tmp_path / "a-file").write_text("")
    bad = cli.invoke(app, ["gap", "--out", str(tmp_path / "a-file"), "--no-progress"])
    assert bad.exit_code == 2 and "a-file: is a file; the results go to a folder" in bad.output, bad.output
    bad = cli.invoke(app, ["scale", "--out", str(tmp_path / "a-file" / "x"), "--no-progress"])
    assert bad.exit_code == 2 and "cannot write here" in bad.output, bad.output


def test_default_parallelism_keeps_solves_off_each_others_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import common, gap, scale

    monkeypatch.setattr(common.os, "cpu_count", lambda: 8)
    assert common.solver_cpus({}) == 2 and common.solver_cpus({"num_workers": 4}) == 4
    assert common.default_workers(True, 2) == 4 and common.default_workers(False, 2) == 8
    assert common.default_workers(True, 16) == 1
    seen: list[tuple[int | None, float]] = []

    class Stop(Exception):
        pass

    def capture(*_: object, workers: int | None, ray_num_cpus: float, **__: object) -> None:
        seen.append((workers, ray_num_cpus))
        raise Stop

    for module, study in (
        (gap, GapStudy(sizes=(4,), seeds=(0,), policies=("sjf",), solver_options={"num_workers": 4})),
        (scale, ScaleStudy(solvers=("cpsat",), solver_sizes=(4,), policies=("sjf",), policy_sizes=(10,), seeds=(0,))),
        (scale, ScaleStudy(solvers=(), policies=("sjf",), policy_sizes=(10,), seeds=(0,))),
    ):
        monkeypatch.setattr(module, "run_tasks", capture)
        run = gap.run_gap_study if module is gap else scale.run_scale_study
        with pytest.raises(Stop):
            run(study, tmp_path / "out", progress=False)
        with pytest.raises(Stop):
            run(study, tmp_path / "out", workers=3, progress=False)
    assert seen == [(2, 4.0), (3, 4.0), (4, 2.0), (3, 2.0), (8, 1.0), (3, 1.0)]


def test_scale_smoke(tmp_path: Path) -> None:
    study = ScaleStudy(
        solvers=("cpsat",),
        solver_sizes=(4,),
        policies=("sjf", "sjf-bsbf"),
        policy_sizes=(10, 40),
        seeds=(0, 1),
        time_limit=20.0,
    )
    outcome = run_scale_study(study, tmp_path, workers=1, progress=False)
    frame = outcome.rows
    assert {
        "method",
        "n",
        "seed",
        "seconds",
        "status",
        "proven_optimal",
        "solver_gap",
        "validated",
        "objective",
    } <= set(frame.columns)
    assert len(frame) == 2 + 2 * 2 * 2
    assert frame["validated"].astype(bool).all()
    assert frame[frame["method"] == "oracle:cpsat"]["proven_optimal"].all()
    fits: dict = outcome.fits.set_index("method").to_dict(orient="index")
    for policy in ("sjf", "sjf-bsbf"):
        assert math.isfinite(fits[policy]["exponent"]) and fits[policy]["points"] == 2
    assert (tmp_path / "scale_loglog.png").is_file() and (tmp_path / "fits.csv").is_file()
    assert set(outcome.summary["method"]) == {"oracle:cpsat", "sjf", "sjf-bsbf"}


class _Crashing:
    """A policy with a bug: it raises on its first decision."""

    name = "test-crashing"
    preemptive = False
    round_length = None

    def decide(self, view: object) -> list:
        raise RuntimeError("bug in the policy")


@needs_data
def test_a_study_with_a_failed_task_exits_1_after_writing_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from heuristics import registry

    registry.available_policies()  # built-ins first; the test policy leaves the registry afterwards
    info = registry.PolicyInfo(_Crashing.name, lambda **_: _Crashing(), "test only: crashes")
    monkeypatch.setitem(registry._REGISTRY, _Crashing.name, info)
    args = ["replay", "pollux", str(POLLUX), "--limit", "10", "--policy", "fifo", "--policy", _Crashing.name]
    result = cli.invoke(_app(), [*args, "--out", str(tmp_path), "--workers", "1", "--no-progress"])
    assert result.exit_code == 1, result.output
    assert "1 failed" in result.output and "bug in the policy" in " ".join(result.output.split())
    assert len(pd.read_csv(tmp_path / "replay.csv")) == 1  # fifo's row is there
    as_json = cli.invoke(_app(), [*args, "--out", str(tmp_path), "--workers", "1", "--json"])
    assert as_json.exit_code == 1 and _Crashing.name in json.dumps(json.loads(as_json.stdout)["failed"])


def _processes() -> dict[int, tuple[int, str]]:
    """Live processes (Linux ``/proc``): pid → (parent pid, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]  # after the name
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state != "Z":
            found[int(entry.name)] = (int(parent), command)
    return found


def _descendants(root: int) -> dict[int, str]:
    """Live descendants of ``root``: pid → command line."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = table[pid][1]
        todo += children.get(pid, [])
    return found


def _still_running(snapshot: dict[int, str]) -> list[int]:
    """The processes of ``snapshot`` (pid → start time) that still run."""
    return [pid for pid, started in snapshot.items() if procs.is_running(pid, started)]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("how", ["ctrl-c", "terminate", "kill"])
def test_a_stopped_study_leaves_no_process_behind(tmp_path: Path, how: str) -> None:
    # Ctrl-C reaches the whole process group; SIGTERM and `kill -9` only the study. Either way no pool
    # worker may go on with the next task and no solver may solve on to its time limit: before, Ctrl-C
    # left the sweep running to the end and a killed study left its workers behind for good.
    command = [sys.executable, "-m", "duetto", "gap", "--sizes", "12", "--cluster", "2x4", "--seeds", "3"]
    command += ["--arrivals", "zero", "--time-limit", "30", "--workers", "2", "--out", str(tmp_path / "gap")]
    command += ["--no-progress", "--no-figures"]
    study = subprocess.Popen(
        command,
        cwd=ROOT,
        start_new_session=True,  # its own process group, as a shell gives a job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not ignored, as in a terminal
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned: dict[int, str] = {}  # pid → start time: the two name one process
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and study.poll() is None:
            descendants = _descendants(study.pid)
            spawned = {pid: start for pid in descendants if (start := procs.proc_start_time(pid)) is not None}
            if sum("solvers.worker" in c for c in descendants.values()) == 2:  # both pool workers are solving
                break
            time.sleep(0.2)
        assert study.poll() is None, "the study ended before it could be stopped"
        if how == "ctrl-c":
            os.killpg(study.pid, signal.SIGINT)
        elif how == "terminate":
            study.terminate()  # SIGTERM to the study only, as a batch system's time limit sends it
        else:
            study.kill()
        _, stderr = study.communicate(timeout=30)
        deadline = time.monotonic() + 15
        while _still_running(spawned) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _still_running(spawned) == [], "processes of the study outlived it"
        if how != "kill":
            assert study.returncode == (130 if how == "ctrl-c" else 143)
            assert "interrupted: the tasks that finished are kept in" in stderr and "Traceback" not in stderr
    finally:
        for pid in [study.pid, *_still_running(spawned)]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        study.wait()


def test_a_pool_stopped_at_once_has_closed_its_wake_up_pipe_when_the_stop_returns() -> None:
    # at exit, the interpreter's hook for process pools writes to each pool's wake-up pipe without a
    # lock; a manager thread still closing that pipe made a stopped study print "OSError: Bad file
    # descriptor" after "error: interrupted" (seen once in CI). The stop now waits for the thread.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=runner._pool_worker_setup)
    future = pool.submit(time.sleep, 60)
    deadline = time.monotonic() + 60
    while not future.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    manager = getattr(pool, "_executor_manager_thread", None)
    wakeup = getattr(pool, "_executor_manager_thread_wakeup", None)
    if manager is None or wakeup is None:
        pytest.skip("this Python's process pool keeps its manager thread elsewhere")
    began = time.monotonic()
    runner._shut_down_now(pool)
    assert not manager.is_alive() and wakeup._closed
    assert time.monotonic() - began < runner.MANAGER_JOIN_SECONDS  # not a wait for the 60 s task


@needs_data
def test_replay_table_sweep_and_plot(tmp_path: Path) -> None:
    app = _app()
    args = [
        "replay",
        "pollux",
        str(POLLUX),
        "--limit",
        "30",
        "--policy",
        "fifo",
        "--policy",
        "sjf",
        "--policy",
        "sjf-bsbf",
        "--interference",
        "constant:1.0",
        "--interference",
        "constant:2.0",
        "--out",
        str(tmp_path),
        "--workers",
        "2",
        "--no-progress",
    ]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Average JCT" in result.output and "sjf-bsbf" in result.output
    frame = pd.read_csv(tmp_path / "replay.csv")
    assert len(frame) == 6 and frame["validated"].all()
    table = pd.read_csv(tmp_path / "table-constant_1.0.csv", index_col=[0, 1])
    assert list(table.columns) == ["All", "Large", "Small"]
    assert set(table.index.get_level_values(0)) == {"Average JCT", "Average queueing", "Makespan", "p99 JCT"}
    row = frame[(frame["policy"] == "sjf") & (frame["interference"] == "constant:1.0")].iloc[0]
    assert table.loc[("Average JCT", "sjf"), "All"] == pytest.approx(row["jct_avg"] / 3600)
    # with ξ = 1 sharing is free: SJF-BSBF shares and is no worse than exclusive SJF
    bsbf = frame[(frame["policy"] == "sjf-bsbf") & (frame["interference"] == "constant:1.0")].iloc[0]
    assert bsbf["shared_jobs"] > 0
    for name in ("sweep_jct.png", "jct_cdf-constant_1.0.png", "replay.parquet"):
        assert (tmp_path / name).is_file()
    schedule = tmp_path / "schedules" / "workload-1" / "constant_2.0" / "sjf-bsbf.json"
    instance = tmp_path / "schedules" / "workload-1" / "constant_2.0" / "instance.json"
    assert schedule.is_file() and instance.is_file()
    plotted = cli.invoke(app, ["plot", str(schedule), "--instance", str(instance), "-o", str(tmp_path / "g.png")])
    assert plotted.exit_code == 0, plotted.output
    assert "valid" in plotted.output and (tmp_path / "g.png").stat().st_size > 10_000
    for name in ("g.foo", "g"):  # a format matplotlib cannot write: one line, exit 2, no file
        bad = cli.invoke(app, ["plot", str(schedule), "--instance", str(instance), "-o", str(tmp_path / name)])
        assert bad.exit_code == 2 and "must end in one of" in bad.output and ".svg" in bad.output, bad.output
        assert not (tmp_path / name).exists()
    unwritable = str(tmp_path / "g.png" / "g.png")  # under a file: one line, exit 2 (was a traceback)
    bad = cli.invoke(app, ["plot", str(schedule), "--instance", str(instance), "-o", unwritable])
    assert bad.exit_code == 2 and "cannot write the figure" in bad.output, bad.output
    # rerun resumes: nothing to run
    again = cli.invoke(app, args)
    assert "0 tasks run, 6 already done" in again.output


@needs_data
def test_replay_on_a_local_ray_cluster(tmp_path: Path) -> None:
    """--ray-address: the same rows as the local pool, computed by Ray workers."""
    from ray.cluster_utils import Cluster

    study = ReplayStudy(trace="pollux", paths=(str(POLLUX),), policies=("sjf", "sjf-ffs"), limit=20)
    local = run_replay(study, tmp_path / "local", workers=1, progress=False, figures=False)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "include_dashboard": False, "object_store_memory": 100 * 1024 * 1024},
    )
    try:
        remote = run_replay(study, tmp_path / "ray", ray_address=cluster.address, progress=False, figures=False)
    finally:
        cluster.shutdown()
    assert remote.run.backend == "ray" and remote.run.ran == 2 and not remote.run.failed
    left = local.rows.set_index("policy")["jct_avg"]
    right = remote.rows.set_index("policy")["jct_avg"]
    pd.testing.assert_series_equal(left.sort_index(), right.sort_index())


@needs_data
def test_interference_specs() -> None:
    from formulation.predictor import PredictedInterference
    from formulation.traces import load_trace

    gavel = load_trace("gavel", GAVEL_TRACE, limit=30)
    measured = interference_from_spec("gavel", gavel)
    predicted = interference_from_spec("predicted:v100", gavel)
    assert measured is not None
    assert isinstance(predicted, PredictedInterference)
    names = list(gavel.profiles)
    forbidden = [(a, b) for a in names for b in names if measured.ratio(gavel.profiles[a], gavel.profiles[b]) is None]
    for a, b in forbidden:  # measured feasibility is kept
        assert predicted.ratio(gavel.profiles[a], gavel.profiles[b]) is None
    assert interference_from_spec("default", gavel) is None
    first = gavel.profiles[names[0]]
    constant = interference_from_spec("constant:1.5", gavel)
    assert constant is not None and constant.ratio(first, first) == 1.5
    pollux = load_trace("pollux", POLLUX, limit=5)
    with pytest.raises(DuettoInputError, match="Gavel job types"):
        interference_from_spec("predicted", pollux)
    with pytest.raises(DuettoInputError, match="unknown interference"):
        interference_from_spec("magic", pollux)
    with pytest.raises(DuettoInputError, match="constant"):
        interference_from_spec("constant:x", pollux)


@needs_data
def test_decision_study_truth_is_measured() -> None:
    """Predicted ξ only changes what SJF-BSBF believes: every schedule is valid under the measured
    truth, and the measured belief reproduces itself."""
    from benchmarks.prediction import decision_study

    frame = decision_study(GAVEL_TRACE, policy="sjf-bsbf", nodes=1, gpus_per_node=8, limit=40, estimator="tree")
    assert list(frame["belief"]) == ["measured", "predicted (cross-fitted)", "predicted (in-sample)", "constant median"]
    assert frame["validated"].all()
    assert frame.loc[0, "decisions_same"] == 1.0
    own_error = float(frame["belief_rmse_on_shared"].tolist()[0])
    assert own_error == 0.0 or math.isnan(own_error)
    assert (frame["jct_avg"] > 0).all()


def test_paper_table_shape() -> None:
    rows = pd.DataFrame(
        [
            {
                "policy": "p",
                "jct_avg": 7200.0,
                "large_jct_avg": 3600.0,
                "small_jct_avg": 10800.0,
                "queueing_avg": 0.0,
                "large_queueing_avg": 0.0,
                "small_queueing_avg": 0.0,
                "makespan": 36000.0,
                "jct_p99": 3600.0,
                "large_jct_p99": 3600.0,
                "small_jct_p99": 3600.0,
            }
        ]
    )
    table = paper_table(rows)
    cells: dict = table.to_dict(orient="index")
    assert [cells[("Average JCT", "p")][c] for c in ("All", "Large", "Small")] == [2.0, 1.0, 3.0]
    assert cells[("Makespan", "p")]["All"] == 10.0
    assert math.isnan(cells[("Makespan", "p")]["Large"])


def test_every_registered_policy_is_measurable() -> None:
    """The gap study takes any registered name: a new policy is measured without code changes."""
    for name in policy_names():
        assert make_policy(name) is not None
    assert GapStudy(policies=tuple(policy_names())).methods()[-len(policy_names()) :] == policy_names()
