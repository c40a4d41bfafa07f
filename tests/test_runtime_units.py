"""Runtime building blocks with real processes: inventory, job specs and templating, plan checks,
MPS lifecycle against the stand-in control program, the launch wrapper and the node agent."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "runtime_fixtures"))

import harness

from cluster_runtime.agent import NodeAgent, read_progress
from cluster_runtime.inventory import (
    fake_inventory,
    inventory_from_dict,
    local_inventory,
    resolve_inventory,
)
from cluster_runtime.mps import MpsControl, MpsError
from cluster_runtime.plan import PlanRejected, validate_plan
from cluster_runtime.procs import find_by_arguments, is_running, proc_start_time
from cluster_runtime.profiler import fit_compute, iteration_time
from cluster_runtime.spec import job_spec_from_dict, plan_from_dict, render_command
from cluster_runtime.store import Store
from formulation.cluster import Cluster
from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import TableInterference
from formulation.speed import Profile


@pytest.fixture(autouse=True)
def _stand_in_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("PATH", harness.runtime_env()["PATH"])
    yield
    assert harness.cleanup(tmp_path) == [], "a test left processes behind"


# --- inventory ---------------------------------------------------------------------------------------


def test_fake_inventory_flat_ids_and_cluster() -> None:
    inventory = fake_inventory("2x4", memory_gib=16)
    assert inventory.num_gpus == 8 and inventory.gpus_per_node == 4
    assert inventory.flat_id(1, 2) == 6
    assert inventory.gpu(6).uuid == "GPU-fake-n1-2"
    assert inventory.flat_of_uuid("GPU-fake-n0-3") == 3
    assert inventory.cluster(capacity=3) == Cluster(2, 4, 16.0, 3)
    with pytest.raises(DuettoInputError, match="NODESxGPUS"):
        fake_inventory("four")


def test_inventory_file_must_be_homogeneous() -> None:
    good = inventory_from_dict({"nodes": [{"gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}]}]})
    assert good.num_gpus == 2 and good.gpu(1).uuid == "GPU-b"
    with pytest.raises(DuettoInputError, match="same number of GPUs"):
        inventory_from_dict({"nodes": [{"gpus": [{"uuid": "GPU-a"}]}, {"gpus": [{"uuid": "b"}, {"uuid": "c"}]}]})
    with pytest.raises(DuettoInputError, match="unique"):
        inventory_from_dict({"nodes": [{"gpus": [{"uuid": "x"}]}, {"gpus": [{"uuid": "x"}]}]})


def test_no_gpu_path_is_clean() -> None:
    # This machine has no NVIDIA driver: NVML raises NVMLError_LibraryNotFound, which means "no GPU".
    assert local_inventory() is None
    with pytest.raises(DuettoInputError, match="--fake-gpus"):
        resolve_inventory()


# --- job specs and templating -----------------------------------------------------------------------


def test_job_spec_validation_messages() -> None:
    spec = job_spec_from_dict(harness.job_spec("ok"))
    assert spec.profile_name == "standin-ok" and spec.inline_profile is not None
    with pytest.raises(DuettoInputError, match="field 'id'"):
        job_spec_from_dict({**harness.job_spec("x"), "id": "../escape"})
    with pytest.raises(DuettoInputError, match="set by the runtime"):
        job_spec_from_dict({**harness.job_spec("x"), "env": {"CUDA_VISIBLE_DEVICES": "0"}})
    with pytest.raises(DuettoInputError, match=r"unknown placeholder '\{gpu_count\}'"):
        job_spec_from_dict({**harness.job_spec("x"), "command": ["run", "--n={gpu_count}"]})


def test_templating_never_goes_through_a_shell() -> None:
    argv = render_command(
        ["train", "--micro-batch={sub_batch}", "--accum", "{steps}", "{{literal}}", "a b; rm -rf /", "$HOME"],
        {"sub_batch": 16, "steps": 4},
    )
    assert argv == ["train", "--micro-batch=16", "--accum", "4", "{literal}", "a b; rm -rf /", "$HOME"]


# --- plan checks (the loop's rules, rejected whole) ---------------------------------------------------


def _instance(capacity: int = 2) -> Instance:
    small = Profile("small", compute_alpha=0.1, memory_base_gib=4, memory_per_sample_gib=0.5)
    big = Profile("big", compute_alpha=0.1, memory_base_gib=20, memory_per_sample_gib=0.25)
    lonely = Profile("lonely", compute_alpha=0.1, memory_base_gib=1)
    jobs = (
        Job("a", 0, 1, 10, 8, "small"),
        Job("b", 0, 1, 10, 8, "small"),
        Job("c", 0, 1, 10, 8, "small"),
        Job("g", 0, 2, 10, 8, "small"),
        Job("big1", 0, 1, 10, 32, "big"),
        Job("big2", 0, 1, 10, 32, "big"),
        Job("solo", 0, 1, 10, 8, "lonely"),
        Job("done", 0, 1, 10, 8, "small"),
        Job("good", 0, 1, 10, 8, "small"),
    )
    interference = TableInterference({("lonely", "small"): None, ("small", "lonely"): None}, default=1.2)
    return Instance(Cluster(2, 2, 32.0, capacity), jobs, {p.name: p for p in (small, big, lonely)}, interference)


def test_valid_plan_resolves_every_gpu_notation() -> None:
    inventory = fake_inventory("2x2")
    plan = plan_from_dict(
        {
            "entries": [
                {"job_id": "a", "gpus": [0], "steps": 2},
                {"job_id": "b", "gpus": [[0, 0]], "steps": 1},
                {"job_id": "g", "gpus": ["GPU-fake-n0-1", [1, 1]], "steps": 1},
            ]
        }
    )
    assignments = validate_plan(plan, inventory, _instance())
    assert [(a.job_id, a.gpus, a.steps) for a in assignments] == [
        ("a", (0,), 2),
        ("b", (0,), 1),
        ("g", (1, 3), 1),
    ]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        (
            [{"job_id": "a", "gpus": [0]}, {"job_id": "b", "gpus": [0]}, {"job_id": "c", "gpus": [0]}],
            "over-fills a GPU",
        ),
        ([{"job_id": "g", "gpus": [0]}], "breaks its gang"),
        ([{"job_id": "a", "gpus": [7]}], "unknown GPU 7"),
        ([{"job_id": "a", "gpus": [[5, 0]]}], "unknown GPU (node 5, index 0)"),
        ([{"job_id": "a", "gpus": ["GPU-nope"]}], "unknown GPU 'GPU-nope'"),
        ([{"job_id": "zzz", "gpus": [0]}], "unknown"),
        ([{"job_id": "big1", "gpus": [1]}, {"job_id": "big2", "gpus": [1]}], "exceeds GPU memory"),
        ([{"job_id": "solo", "gpus": [2]}, {"job_id": "a", "gpus": [2]}], "may not share"),
        ([{"job_id": "a", "gpus": [0], "steps": 3}], "invalid accumulation steps"),
        ([{"job_id": "done", "gpus": [0]}], "is completed"),
        ([{"job_id": "a", "gpus": [0]}, {"job_id": "a", "gpus": [1]}], "more than once"),
    ],
)
def test_bad_plans_are_rejected_whole_with_a_clear_message(entries: list[dict], expected: str) -> None:
    # Every bad plan also carries one good entry first: the rejection must still be whole.
    plan = plan_from_dict([{"job_id": "good", "gpus": [3]}, *entries])
    with pytest.raises(PlanRejected) as caught:
        validate_plan(plan, fake_inventory("2x2"), _instance(), finished={"done": "completed"})
    assert expected in str(caught.value)
    assert str(caught.value).startswith("plan: rejected whole, nothing changed")


def test_rejection_lists_every_problem() -> None:
    plan = plan_from_dict([{"job_id": "g", "gpus": [0]}, {"job_id": "a", "gpus": [9]}, {"job_id": "x", "gpus": [1]}])
    with pytest.raises(PlanRejected) as caught:
        validate_plan(plan, fake_inventory("2x2"), _instance())
    assert len(caught.value.problems) == 3


# --- MPS lifecycle against the stand-in ---------------------------------------------------------------


def _commands(log_dir: Path) -> list[str]:
    return [line.split(" ", 2)[2] for line in (log_dir / "commands.log").read_text().splitlines()]


def test_mps_start_restart_and_quit(tmp_path: Path) -> None:
    mps = MpsControl(tmp_path / "pipe", tmp_path / "log", default_active_thread_percentage=60)
    mps.start()
    first = mps.pid()
    assert first is not None and mps.alive()
    assert oct((tmp_path / "pipe").stat().st_mode & 0o777) == "0o700"
    assert mps.command("get_default_active_thread_percentage") == "60.0"
    assert mps.ensure() is False  # alive: nothing to do
    os.kill(first, signal.SIGKILL)  # the control daemon dies
    deadline = time.monotonic() + 5
    while is_running(first, None) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mps.ensure() is True
    assert mps.alive() and mps.pid() != first and mps.restarts == 1
    mps.quit()
    assert not mps.alive()
    assert _commands(tmp_path / "log") == [
        "start -d",
        "set_default_active_thread_percentage 60",
        "get_default_active_thread_percentage",
        "start -d",
        "set_default_active_thread_percentage 60",
        "quit",
    ]
    with pytest.raises(MpsError, match="Cannot find MPS control daemon"):
        mps.command("get_server_list")
    env = mps.client_env(50)
    assert env == {
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "log"),
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
    }


def test_missing_mps_binary_is_a_clear_error(tmp_path: Path) -> None:
    mps = MpsControl(tmp_path / "p", tmp_path / "l", binary="no-such-mps-control")
    with pytest.raises(MpsError, match="not found on PATH"):
        mps.start()


# --- state database -------------------------------------------------------------------------------------


def test_store_uses_wal(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    assert store.journal_mode() == "wal"
    store.close()
    assert sqlite3.connect(tmp_path / "state.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- the launch wrapper and the node agent ---------------------------------------------------------------


def _agent(tmp_path: Path) -> NodeAgent:
    return NodeAgent(
        0,
        {"mode": "on", "pipe_dir": str(tmp_path / "pipe"), "log_dir": str(tmp_path / "log")},
        gpus=[{"uuid": "GPU-fake-n0-0", "memory_gib": 32, "name": "fake"}],
    )


def _request(tmp_path: Path, launch_id: str, argv: list[str], iterations: int = 5, pct: int | None = None) -> dict:
    run_dir = tmp_path / "runs" / launch_id
    return {
        "launch_id": launch_id,
        "run_dir": str(run_dir),
        "argv": argv,
        "env": {
            "DUETTO_JOB_ID": launch_id,
            "DUETTO_ITERATIONS": str(iterations),
            "DUETTO_BATCH_SIZE": "8",
            "DUETTO_SUB_BATCH": "4",
            "DUETTO_ACCUMULATION_STEPS": "2",
            "DUETTO_PROGRESS_FILE": str(run_dir / "progress"),
        },
        "workdir": None,
        "gpu_uuids": ["GPU-fake-n0-0"],
        "thread_percentage": pct,
    }


def _wait_dead(agent: NodeAgent, launch_id: str, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = agent.poll([launch_id])[launch_id]
        if not status["alive"]:
            return status
        time.sleep(0.02)
    raise TimeoutError(launch_id)


def test_agent_launch_progress_exit_and_environment(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    agent.start_mps()
    ledger = tmp_path / "ledger"
    argv = [sys.executable, str(harness.STANDIN), "--alpha", "0.005", "--ledger", str(ledger)]
    agent.launch(_request(tmp_path, "ok", argv, pct=50))
    status = _wait_dead(agent, "ok")
    assert status["exit"]["returncode"] == 0 and status["progress"] == 5
    start = harness.events(harness.read_ledger(ledger), "start")[0]
    assert start["cuda_visible_devices"] == "GPU-fake-n0-0"
    assert start["mps_pipe"] == str(tmp_path / "pipe") and start["thread_percentage"] == "50"
    assert (start["sub_batch"], start["steps"]) == (4, 2)
    # A job that cannot even be executed: the wrapper records 127.
    agent.launch(_request(tmp_path, "missing", [str(tmp_path / "no-such-program")]))
    assert _wait_dead(agent, "missing")["exit"]["returncode"] == 127
    assert "cannot start" in agent.read_log(str(tmp_path / "runs" / "missing"), "stderr")
    agent.quit_mps()
    agent.close()


def test_agent_stop_and_readopt_after_losing_the_child(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    argv = [sys.executable, str(harness.STANDIN), "--alpha", "0.05"]
    answer = agent.launch(_request(tmp_path, "long", argv, iterations=10_000))
    pid, start = answer["pid"], answer["proc_start"]
    assert start == proc_start_time(pid)
    deadline = time.monotonic() + 10
    while read_progress(tmp_path / "runs" / "long" / "progress") is None and time.monotonic() < deadline:
        time.sleep(0.02)
    # A new agent (as after a daemon crash) finds the wrapper through its pid file and adopts it.
    agent.close()  # the zygote goes; the wrapper it forked does not depend on it
    assert is_running(pid, start)
    fresh = _agent(tmp_path)
    found = fresh.find("long", str(tmp_path / "runs" / "long"))
    assert found is not None and found["pid"] == pid and found["status"]["alive"]
    assert fresh.stop("long") is True
    status = _wait_dead(fresh, "long")
    assert status["exit"]["signal"] == signal.SIGTERM or status["exit"]["returncode"] == 128 + signal.SIGTERM
    assert not is_running(pid, start)
    assert fresh.find("never", str(tmp_path / "runs" / "never")) is None
    fresh.close()


def test_supervise_direct_mode_records_exit_and_is_findable(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit.json"
    script = Path(__file__).parent.parent / "cluster_runtime" / "supervise.py"
    wrapper = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(script),
            "--launch-id",
            "t-42",
            "--exit-file",
            str(exit_file),
            "--",
            sys.executable,
            "-c",
            "import sys, time; time.sleep(0.5); sys.exit(7)",
        ]
    )
    deadline = time.monotonic() + 5
    while not find_by_arguments("--launch-id", "t-42") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert find_by_arguments("--launch-id", "t-42")[0][0] == wrapper.pid
    assert wrapper.wait(timeout=10) == 7
    record = json.loads(exit_file.read_text())
    assert record["returncode"] == 7 and record["signal"] is None


# --- profiling arithmetic -------------------------------------------------------------------------------


def test_fit_compute_recovers_eq1() -> None:
    alpha, beta, batch = 0.02, 0.001, 32
    points = [(s, s * (alpha + beta * batch / s)) for s in (1, 2, 4)]
    fitted_alpha, fitted_beta, residual = fit_compute(batch, points)
    assert fitted_alpha == pytest.approx(alpha) and fitted_beta == pytest.approx(beta) and residual < 1e-9


def test_iteration_time_drops_warmup_and_needs_data() -> None:
    history = [(0, 0.0), (1, 5.0), (2, 5.1), (3, 5.2), (4, 5.3)]
    assert iteration_time(history) == (pytest.approx(0.1), 3)
    with pytest.raises(DuettoInputError, match="profile for longer"):
        iteration_time(history[:3])
