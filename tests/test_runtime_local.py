"""The local backend end to end: real daemons (``python -m cluster_runtime daemon``), real job
processes (the stand-in training script), the stand-in MPS control program on PATH, the CLI."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "runtime_fixtures"))

import harness

from cluster_runtime.api import RuntimeClient
from duetto.commands.runtime import register
from formulation.errors import DuettoInputError

app = typer.Typer()
register(app)
runner = CliRunner()


@pytest.fixture
def workdir(tmp_path: Path):
    yield tmp_path
    assert harness.cleanup(tmp_path) == [], "a test left processes behind"


def cli(*args: str) -> Any:
    result = runner.invoke(app, list(args), env=harness.runtime_env())
    return result


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def all_finished(status: dict[str, Any]) -> bool:
    return all(job["state"] in ("completed", "failed", "cancelled") for job in status["jobs"])


def commands(state: Path, node: int) -> list[str]:
    log = state / "mps" / f"node{node}" / "log" / "commands.log"
    return [line.split(" ", 2)[2] for line in log.read_text().splitlines()]


def test_local_end_to_end(workdir: Path) -> None:
    state, ledger = workdir / "s", workdir / "ledger"
    daemon = harness.DaemonProcess(state, "--fake-gpus", "2x2", "--default-thread-percentage", "90").start()
    try:
        assert stat.S_IMODE((state / "duetto.sock").stat().st_mode) == 0o600
        jobs = [
            harness.job_spec("a", iterations=6, ledger=ledger),
            harness.job_spec("b", iterations=6, ledger=ledger),
            harness.job_spec("c", iterations=6, num_gpus=2, ledger=ledger),
        ]
        result = cli("submit", str(write(workdir / "jobs.json", jobs)), "--state", str(state))
        assert result.exit_code == 0, result.output
        assert "submitted c" in result.output
        plan = {
            "entries": [
                {"job_id": "a", "gpus": [0], "steps": 2},
                {"job_id": "b", "gpus": [[0, 0]]},
                {"job_id": "c", "gpus": [[1, 0], [1, 1]], "steps": 4},
            ]
        }
        result = cli("apply", str(write(workdir / "plan.json", plan)), "--state", str(state))
        assert result.exit_code == 0 and "plan 1 applied (3 job(s))" in result.output, result.output
        status = daemon.client.wait_until(all_finished, timeout=60)
        assert {job["id"]: job["state"] for job in status["jobs"]} == {
            "a": "completed",
            "b": "completed",
            "c": "completed",
        }
        records = harness.read_ledger(ledger)
        start = {e["job"]: e for e in harness.events(records, "start")}
        # CUDA_VISIBLE_DEVICES by UUID; MPS client settings; the shared GPU gets a thread share.
        assert start["a"]["cuda_visible_devices"] == "GPU-fake-n0-0"
        assert start["c"]["cuda_visible_devices"] == "GPU-fake-n1-0,GPU-fake-n1-1"
        assert start["a"]["thread_percentage"] == "50" and start["b"]["thread_percentage"] == "50"
        assert start["c"]["thread_percentage"] is None
        assert start["a"]["mps_pipe"] == str(state / "mps" / "node0" / "pipe")
        assert start["c"]["mps_log"] == str(state / "mps" / "node1" / "log")
        # Accumulation: sub-batch x steps is always the full batch, also in the templated arguments.
        assert (start["a"]["sub_batch"], start["a"]["steps"]) == (4, 2)
        assert (start["c"]["sub_batch"], start["c"]["steps"]) == (2, 4)
        assert start["c"]["argv"][start["c"]["argv"].index("--sub-batch") + 1] == "2"
        done = harness.events(records, "done")
        assert sorted(e["job"] for e in done) == ["a", "b", "c"]
        assert all(e["samples_per_iteration"] == 8 for e in done)
        result = cli("status", "--state", str(state))
        assert result.exit_code == 0 and "completed 3" in result.output, result.output
        result = cli("logs", "a", "--state", str(state))
        assert "stand-in a launch a." in result.output

        # A new plan moves a running job: it is stopped, resumes from its progress elsewhere.
        daemon.client.submit(harness.job_spec("e", iterations=400, alpha=0.005, ledger=ledger))
        daemon.client.apply({"entries": [{"job_id": "e", "gpus": [0]}]})
        daemon.client.wait_until(lambda s: next(j for j in s["jobs"] if j["id"] == "e")["progress"] >= 20, 30)
        daemon.client.apply({"entries": [{"job_id": "e", "gpus": [3], "steps": 2}]})
        daemon.client.wait_until(all_finished, timeout=60)
        e_starts = harness.events(harness.read_ledger(ledger), "start", "e")
        assert len(e_starts) == 2 and e_starts[1]["start_iteration"] >= 20
        assert e_starts[1]["cuda_visible_devices"] == "GPU-fake-n1-1" and e_starts[1]["steps"] == 2
        assert len(harness.events(harness.read_ledger(ledger), "stopped", "e")) == 1
        assert len(harness.events(harness.read_ledger(ledger), "done", "e")) == 1

        # Cancel a running job: its process is stopped and it never comes back.
        daemon.client.submit(harness.job_spec("d", iterations=10_000, ledger=ledger))
        daemon.client.apply({"entries": [{"job_id": "d", "gpus": [1]}]})
        daemon.client.wait_until(lambda s: next(j for j in s["jobs"] if j["id"] == "d")["progress"] >= 1, 30)
        result = cli("cancel", "d", "--state", str(state))
        assert result.exit_code == 0 and "d: cancelled" in result.output
        status = daemon.client.wait_until(lambda s: next(j for j in s["jobs"] if j["id"] == "d")["launch"] is None, 30)
        assert harness.events(harness.read_ledger(ledger), "stopped", "d")
        assert next(j for j in status["jobs"] if j["id"] == "d")["state"] == "cancelled"
    finally:
        daemon.stop()
    assert daemon.wait_exit() == 0
    assert commands(state, 0)[0] == "start -d" and commands(state, 0)[1] == "set_default_active_thread_percentage 90"
    assert commands(state, 0)[-1] == "quit" and commands(state, 1)[-1] == "quit"
    assert harness.mps_pids(state) == []
    assert not (state / "duetto.sock").exists()


def test_crashing_jobs_are_requeued_with_a_retry_limit(workdir: Path) -> None:
    state, ledger = workdir / "s", workdir / "ledger"
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2").start()
    try:
        flaky = harness.job_spec(
            "flaky",
            iterations=4,
            args=("--fail-at", "2", "--fail-attempts", "2"),
            max_retries=3,
            ledger=ledger,
        )
        broken = harness.job_spec("broken", iterations=4, args=("--fail-at", "1"), max_retries=1, ledger=ledger)
        daemon.client.submit(flaky)
        daemon.client.submit(broken)
        daemon.client.apply([{"job_id": "flaky", "gpus": [0]}, {"job_id": "broken", "gpus": [1]}])
        status = daemon.client.wait_until(all_finished, timeout=60)
        jobs = {job["id"]: job for job in status["jobs"]}
        assert jobs["flaky"]["state"] == "completed" and jobs["flaky"]["attempts"] == 2
        assert jobs["broken"]["state"] == "failed" and jobs["broken"]["attempts"] == 2
        assert jobs["broken"]["last_error"] == "exit code 3"
        records = harness.read_ledger(ledger)
        assert len(harness.events(records, "crash", "flaky")) == 2
        assert len(harness.events(records, "done", "flaky")) == 1
        # A requeued job resumes from the progress it reported.
        assert [e["start_iteration"] for e in harness.events(records, "start", "flaky")] == [0, 2, 3]
        assert len(harness.events(records, "crash", "broken")) == 2
        detail = daemon.client.job("broken")
        assert [launch["outcome"] for launch in detail["launches"]] == ["failed", "failed"]
    finally:
        daemon.stop()


def test_rejected_plans_and_submissions_change_nothing(workdir: Path) -> None:
    state, ledger = workdir / "s", workdir / "ledger"
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2", "--gpu-memory-gib", "16").start()
    try:
        for name in ("x", "y", "z"):
            daemon.client.submit(harness.job_spec(name, iterations=10_000, ledger=ledger))
        for name in ("h1", "h2"):
            daemon.client.submit(harness.job_spec(name, iterations=10_000, memory=(7.0, 0.25), ledger=ledger))
        daemon.client.submit(harness.job_spec("pair", iterations=10_000, num_gpus=2, ledger=ledger))
        daemon.client.apply([{"job_id": "x", "gpus": [0]}])
        before = daemon.client.wait_until(
            lambda s: (
                next(j for j in s["jobs"] if j["id"] == "x")["launch"]
                and next(j for j in s["jobs"] if j["id"] == "x")["launch"]["state"] == "running"
            ),
            30,
        )
        running = next(j for j in before["jobs"] if j["id"] == "x")["launch"]["id"]
        bad_plans = {
            "over-fills a GPU": [
                {"job_id": "x", "gpus": [0]},
                {"job_id": "y", "gpus": [0]},
                {"job_id": "z", "gpus": [0]},
            ],
            "breaks its gang": [{"job_id": "pair", "gpus": [0]}],
            "unknown GPU 5": [{"job_id": "y", "gpus": [5]}],
            "unknown (not submitted)": [{"job_id": "ghost", "gpus": [1]}],
            "exceeds GPU memory": [{"job_id": "h1", "gpus": [1], "steps": 1}, {"job_id": "h2", "gpus": [1]}],
        }
        for expected, plan in bad_plans.items():
            result = cli("apply", str(write(workdir / "bad.json", plan)), "--state", str(state))
            assert result.exit_code == 2, result.output
            assert "rejected whole, nothing changed" in result.output and expected in " ".join(result.output.split())
        time.sleep(0.3)  # a few reconcile passes
        after = daemon.client.status()
        assert after["plan"]["id"] == before["plan"]["id"]
        assert next(j for j in after["jobs"] if j["id"] == "x")["launch"]["id"] == running
        assert [j["id"] for j in after["jobs"] if j["launch"]] == ["x"]
        assert [e["job"] for e in harness.events(harness.read_ledger(ledger), "start")] == ["x"]
        # Bad submissions: clear one-line errors, nothing stored.
        with pytest.raises(DuettoInputError, match="unknown profile 'nope'"):
            daemon.client.submit({**harness.job_spec("w"), "profile": "nope"})
        with pytest.raises(DuettoInputError, match="already submitted"):
            daemon.client.submit(harness.job_spec("x"))
        with pytest.raises(DuettoInputError, match="demands 4 GPUs but the cluster has 2"):
            daemon.client.submit(harness.job_spec("huge", num_gpus=4))
        # A list is submitted whole or not at all: a bad spec anywhere in it stores none of it.
        with pytest.raises(DuettoInputError, match="job 'w', field 'profile': unknown profile 'nope'"):
            daemon.client.submit([harness.job_spec("n1"), {**harness.job_spec("w"), "profile": "nope"}])
        with pytest.raises(DuettoInputError, match="job 'x', field 'id': job 'x' was already submitted"):
            daemon.client.submit([harness.job_spec("n2"), harness.job_spec("x")])  # found while inserting
        with pytest.raises(DuettoInputError, match="job 'n3' appears twice"):
            daemon.client.submit([harness.job_spec("n3"), harness.job_spec("n3")])
        good = write(workdir / "good.json", [harness.job_spec("n4")])
        bad = write(workdir / "typo.json", {**harness.job_spec("n5"), "num_gpus": 0})
        result = cli("submit", str(good), str(bad), "--state", str(state))
        assert result.exit_code == 2 and "typo.json, field 'num_gpus'" in result.output, result.output
        result = cli(
            "submit", str(good), str(write(workdir / "again.json", harness.job_spec("n4"))), "--state", str(state)
        )
        assert result.exit_code == 2 and "job 'n4' is also in" in result.output, result.output
        assert len(daemon.client.status()["jobs"]) == 6
    finally:
        daemon.stop()


def _exactly_once(ledger: Path, jobs: list[str]) -> list[dict[str, Any]]:
    records = harness.read_ledger(ledger)
    assert harness.events(records, "double") == [], "a job ran twice at the same time"
    assert Counter(e["job"] for e in harness.events(records, "done")) == Counter(jobs)
    return records


def test_sigkill_in_the_middle_of_applying_a_plan(workdir: Path) -> None:
    state, ledger, locks = workdir / "s", workdir / "ledger", workdir / "locks"
    locks.mkdir()
    names = [f"j{i}" for i in range(6)]
    # The daemon SIGKILLs itself right after the 3rd process spawn, before recording its pid: the worst
    # moment (a process runs that the database does not know by pid).
    daemon = harness.DaemonProcess(state, "--fake-gpus", "2x2").start("--debug-crash-after-launches", "3")
    for name in names:
        daemon.client.submit(harness.job_spec(name, iterations=30, alpha=0.02, ledger=ledger, lock_dir=locks))
    daemon.client.apply([{"job_id": name, "gpus": [i % 4]} for i, name in enumerate(names)])
    assert daemon.wait_exit(timeout=30) == -signal.SIGKILL
    spawned = len(harness.events(harness.read_ledger(ledger), "start")) if ledger.exists() else 0
    assert spawned <= 3
    daemon.start()  # same state, no fault injection
    try:
        status = daemon.client.wait_until(all_finished, timeout=90)
        assert all(job["state"] == "completed" for job in status["jobs"])
        assert status["daemon"]["recovered"] == {"adopted": 3, "not_started": 3, "rolled_back": 0}
        records = _exactly_once(ledger, names)
        # The three that were running when the daemon died were adopted, never started again.
        assert Counter(e["job"] for e in harness.events(records, "start")) == Counter(names)
    finally:
        daemon.stop()


def test_sigkill_while_jobs_run_then_restart(workdir: Path) -> None:
    state, ledger, locks = workdir / "s", workdir / "ledger", workdir / "locks"
    locks.mkdir()
    names = ["r0", "r1", "r2", "r3"]
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2").start()
    for name in names:
        daemon.client.submit(harness.job_spec(name, iterations=25, alpha=0.02, ledger=ledger, lock_dir=locks))
    daemon.client.apply([{"job_id": n, "gpus": [i % 2]} for i, n in enumerate(names)])
    daemon.client.wait_until(lambda s: sum(1 for j in s["jobs"] if j["progress"] >= 3) >= 2, 30)
    daemon.kill()
    time.sleep(0.7)  # jobs go on (some finish) while no daemon watches
    daemon.start()
    try:
        status = daemon.client.wait_until(all_finished, timeout=60)
        assert all(job["state"] == "completed" for job in status["jobs"])
        records = _exactly_once(ledger, names)
        assert Counter(e["job"] for e in harness.events(records, "start")) == Counter(names)
    finally:
        daemon.stop()


def _max_overlap(records: list[dict[str, Any]]) -> int:
    """Most jobs at once on one GPU, from the ledger's start/done times."""
    intervals: dict[str, list[tuple[float, float]]] = {}
    done = {e["launch"]: e["time"] for e in records if e["event"] in ("done", "stopped", "crash")}
    for e in harness.events(records, "start"):
        for uuid in e["cuda_visible_devices"].split(","):
            intervals.setdefault(uuid, []).append((e["time"], done[e["launch"]]))
    worst = 0
    for spans in intervals.values():
        for t, _ in spans:
            worst = max(worst, sum(1 for a, b in spans if a <= t < b))
    return worst


@pytest.mark.parametrize("policy", ["sjf-bsbf", pytest.param("fifo", marks=pytest.mark.slow)])
def test_policy_decides_on_every_arrival_and_completion(workdir: Path, policy: str) -> None:
    state, ledger = workdir / "s", workdir / "ledger"
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2", "--policy", policy).start()
    try:
        names = [f"p{i}" for i in range(6)]
        for i, name in enumerate(names):
            daemon.client.submit(
                harness.job_spec(name, iterations=8 + 4 * i, alpha=0.01, num_gpus=2 if i == 3 else 1, ledger=ledger)
            )
        status = daemon.client.wait_until(all_finished, timeout=90)
        assert all(job["state"] == "completed" for job in status["jobs"])
        assert status["plan"]["source"] == f"policy:{policy}"
        records = _exactly_once(ledger, names)
        assert _max_overlap(records) <= (2 if policy == "sjf-bsbf" else 1)
        assert status["policy"] == policy
    finally:
        daemon.stop()


def test_tcp_listener_needs_the_token_and_dead_mps_is_restarted(workdir: Path) -> None:
    state, token_file = workdir / "s", workdir / "token"
    daemon = harness.DaemonProcess(
        state, "--fake-gpus", "1x1", "--listen", "127.0.0.1:0", "--token-file", str(token_file)
    )
    daemon.start(wait=False)
    try:
        deadline = time.monotonic() + 60
        while not (state / "api-address").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        address = (state / "api-address").read_text().strip()
        assert address.startswith("127.0.0.1:") and not (state / "duetto.sock").exists()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        with pytest.raises(RuntimeError, match="401"):
            RuntimeClient(address=address, token="wrong").status()
        client = RuntimeClient(address=address, token=token_file.read_text().strip())
        daemon.client = client
        assert client.status()["backend"] == "local"
        result = cli("status", "--address", address, "--token-file", str(token_file), "--json")
        assert result.exit_code == 0 and json.loads(result.output)["capacity"] == 2
        # The MPS control daemon dies: the next check restarts it.
        first = harness.mps_pids(state)
        assert len(first) == 1
        os.kill(first[0], signal.SIGKILL)
        status = client.wait_until(lambda s: s["mps_restarts"] >= 1 and s["nodes"][0]["mps"]["alive"], 30)
        assert status["nodes"][0]["mps"]["pid"] != first[0]
        assert commands(state, 0).count("start -d") == 2
    finally:
        daemon.stop()


def test_replays_a_computed_schedule_in_its_order(workdir: Path) -> None:
    from formulation.cluster import Cluster
    from formulation.instance import Instance, Job
    from formulation.io import schedule_to_dict
    from formulation.speed import Profile
    from heuristics import simulate

    state, ledger = workdir / "s", workdir / "ledger"
    specs = [harness.job_spec(f"o{i}", iterations=4 + 3 * i, alpha=0.01, ledger=ledger) for i in range(5)]
    specs.append(harness.job_spec("o5", iterations=5, num_gpus=2, alpha=0.01, ledger=ledger))
    # The schedule a solver or policy computed for exactly these jobs (here SJF-BSBF, simulated; the
    # oracle writes the same duetto-schedule format).
    profiles = {
        s["profile"]["name"]: Profile(
            s["profile"]["name"],
            compute_alpha=s["profile"]["compute_alpha"],
            memory_base_gib=1.0,
            memory_per_sample_gib=0.1,
        )
        for s in specs
    }
    jobs = tuple(Job(s["id"], 0.0, s["num_gpus"], float(s["iterations"]), 8, s["profile"]["name"]) for s in specs)
    schedule = simulate(Instance(Cluster(1, 2, 32.0, 2), jobs, profiles), "sjf-bsbf").schedule
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2").start()
    try:
        for spec in specs:
            daemon.client.submit(spec)
        result = cli("apply", str(write(workdir / "schedule.json", schedule_to_dict(schedule))), "--state", str(state))
        assert result.exit_code == 0, result.output
        status = daemon.client.wait_until(all_finished, timeout=90)
        assert all(job["state"] == "completed" for job in status["jobs"])
        assert status["plan"]["source"] == "policy:replay:sjf-bsbf"
        records = _exactly_once(ledger, [s["id"] for s in specs])
        # Per GPU, a job the schedule starts later was never launched before one it starts earlier, and
        # every job ran on its scheduled GPUs with its scheduled steps.
        segments = {plan.job_id: plan.segments[0] for plan in schedule.plans}
        launched = {job["id"]: job["first_start"] for job in status["jobs"]}
        for a, first in segments.items():
            for b, second in segments.items():
                if set(first.gpus) & set(second.gpus) and first.start < second.start - 1e-9:
                    assert launched[a] <= launched[b], (a, b)
        for e in harness.events(records, "start"):
            expected = ",".join(f"GPU-fake-n0-{g}" for g in segments[e["job"]].gpus)
            assert (e["cuda_visible_devices"], e["steps"]) == (expected, segments[e["job"]].steps)
    finally:
        daemon.stop()
