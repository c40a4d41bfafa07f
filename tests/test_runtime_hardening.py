"""Runtime hardening (issue 17), against real daemons, real job processes and the stand-in MPS program:
strict request validation, a client that holds under concurrency, contained job processes, crash
recovery that never charges a job for the runtime's own faults, safe start and stop."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "runtime_fixtures"))

import harness

from cluster_runtime.api import DaemonUnavailable, RuntimeClient
from duetto.commands.runtime import register
from formulation.errors import DuettoInputError

app = typer.Typer()
register(app)
runner = CliRunner()


@pytest.fixture
def workdir(tmp_path: Path):
    yield tmp_path
    assert harness.cleanup(tmp_path) == [], "a test left processes behind"


def raw(socket_path: Path, request: bytes, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    """Send ``request`` as is on the daemon's unix socket; the status code and JSON body of the answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(socket_path))
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"connection dropped without an answer: {data!r}"
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk
            rest += chunk
    return int(head.split(b" ", 2)[1]), json.loads(rest[:length])


def post(socket_path: Path, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    payload = json.dumps(body).encode()
    return raw(
        socket_path,
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n\r\n".encode() + payload,
    )


# --- 5. strict types, one-line 400s ------------------------------------------------------------------


def test_bad_requests_are_one_line_400s_naming_the_field_and_change_nothing(workdir: Path) -> None:
    state = workdir / "s"
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2").start()
    sock = state / "duetto.sock"
    try:
        daemon.client.submit(harness.job_spec("a", iterations=10_000))
        good = harness.job_spec("b")
        bad_jobs = {
            "num_gpus": {**good, "num_gpus": "2"},
            "iterations": {**good, "iterations": 10**400},
            "max_retries": {**good, "max_retries": 10**20},
            "batch_size": {**good, "batch_size": 8.0},
            "command.1": {**good, "command": [sys.executable, "a\0b"]},
            "env": {**good, "env": {"A=B": "x"}},
            "workdir": {**good, "workdir": str(workdir / "no-such-folder")},
        }
        for field, spec in bad_jobs.items():
            code, answer = post(sock, "/v1/jobs", spec)
            assert code == 400, (field, answer)
            assert f"field '{field}'" in answer["error"] and "\n" not in answer["error"], answer
        bad_plans = {
            "entries.0.gpus.0": [{"job_id": "a", "gpus": [True]}],
            "entries.0.gpus.0 ": [{"job_id": "a", "gpus": [1.0]}],
            "entries.0.steps": [{"job_id": "a", "gpus": [0], "steps": "2"}],
        }
        for field, plan in bad_plans.items():
            code, answer = post(sock, "/v1/plan", plan)
            assert code == 400 and f"field '{field.strip()}'" in answer["error"], answer
        for path in ("/v1/jobs", "/v1/plan", "/v1/jobs/a/cancel", "/v1/reconcile"):
            for body in ([1], 1, "x", None, [[]]):
                code, answer = post(sock, path, body)
                assert code in (200, 400) and "internal" not in answer.get("error", ""), (path, body, answer)
        for body in ({"leave_running": "false"}, [1], {"leave": True}):
            code, answer = post(sock, "/v1/shutdown", body)
            assert code == 400 and "\n" not in answer["error"], answer
        code, answer = raw(sock, b"GET /v1/jobs/a/logs?tail=abc HTTP/1.1\r\nHost: x\r\n\r\n")
        assert code == 400 and "'tail'" in answer["error"]
        code, answer = raw(sock, b"GET /v1/jobs/a/logs?stream=both HTTP/1.1\r\nHost: x\r\n\r\n")
        assert code == 400 and "'stream'" in answer["error"]
        code, answer = raw(sock, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n\xff\xfe")
        assert code == 400 and "UTF-8" in answer["error"]
        code, answer = raw(sock, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}")
        assert code == 400 and "Content-Length" in answer["error"]
        start = time.monotonic()
        code, answer = raw(sock, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}")
        assert code == 400 and "Content-Length" in answer["error"] and time.monotonic() - start < 5
        code, answer = raw(sock, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nNaN")
        assert code == 400 and "NaN" in answer["error"]
        # Nothing was stored, the daemon still runs, and nothing was placed.
        status = daemon.client.status()
        assert [job["id"] for job in status["jobs"]] == ["a"] and status["plan"] is None
        assert not any(job["launch"] for job in status["jobs"])
        # The command line: the same specs are one line and exit 2, no traceback.
        path = workdir / "huge.json"
        path.write_text(json.dumps(bad_jobs["iterations"]))
        result = runner.invoke(app, ["submit", str(path), "--state", str(state)], env=harness.runtime_env())
        assert result.exit_code == 2 and "field 'iterations'" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
        with pytest.raises(DuettoInputError, match="field 'leave_running'"):
            daemon.client.request("POST", "/v1/shutdown", {"leave_running": 0})
        assert daemon.client.health()["ok"]
    finally:
        daemon.stop()


# --- 3. the client under concurrency -----------------------------------------------------------------


def test_two_hundred_concurrent_clients_all_get_an_answer(workdir: Path) -> None:
    state = workdir / "s"
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2").start()
    try:
        for i in range(3):
            daemon.client.submit(harness.job_spec(f"c{i}", iterations=10_000))
        client = RuntimeClient(socket_path=state / "duetto.sock", timeout=60)
        # A stalled client (headers never finished) holds one handler at most REQUEST_TIMEOUT_S and
        # does not stop the others.
        stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stalled.connect(str(state / "duetto.sock"))
        stalled.sendall(b"GET /v1/status HTTP/1.1\r\n")

        def one(_: int) -> int:
            return len(client.status()["jobs"])

        with ThreadPoolExecutor(max_workers=200) as pool:
            answers = list(pool.map(one, range(200)))
        assert answers == [3] * 200
        stalled.close()
    finally:
        daemon.stop()


# --- 2. no orphan copies -----------------------------------------------------------------------------


def _job(status: dict[str, Any], job_id: str) -> dict[str, Any]:
    return next(job for job in status["jobs"] if job["id"] == job_id)


def _alive(pid: int) -> bool:
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_text[stat_text.rfind(")") + 2] not in "ZX"


def test_a_killed_wrapper_leaves_no_orphan_copy_and_shutdown_leaves_no_process(workdir: Path) -> None:
    state, ledger, locks = workdir / "s", workdir / "ledger", workdir / "locks"
    locks.mkdir()
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x1").start()
    try:
        daemon.client.submit(
            harness.job_spec("o", iterations=100_000, alpha=0.01, ledger=ledger, lock_dir=locks, args=("--escape",))
        )
        daemon.client.apply([{"job_id": "o", "gpus": [0]}])
        status = daemon.client.wait_until(lambda s: _job(s, "o")["progress"] >= 3, 30)
        first = _job(status, "o")["launch"]
        wrapper = first["pids"][0]
        records = harness.read_ledger(ledger)
        job_pid = harness.events(records, "start", "o")[0]["pid"]
        escapee = harness.events(records, "escapee", "o")[0]["escapee"]
        assert _alive(job_pid) and _alive(escapee)
        harness.os.kill(wrapper, harness.signal.SIGKILL)  # the wrapper dies; its job and helper do not
        status = daemon.client.wait_until(
            lambda s: (
                (_job(s, "o")["launch"] or {}).get("id") not in (None, first["id"]) and _job(s, "o")["progress"] >= 1
            ),
            30,
        )
        second = _job(status, "o")["launch"]
        daemon.client.wait_until(lambda s: len(harness.events(harness.read_ledger(ledger), "start", "o")) >= 2, 30)
        # The lost launch's processes were killed before the relaunch: one copy at a time, never two.
        assert not _alive(job_pid) and not _alive(escapee)
        records = harness.read_ledger(ledger)
        assert harness.events(records, "double") == []
        assert len(harness.events(records, "start", "o")) == 2
        outcomes = [launch["outcome"] for launch in daemon.client.job("o")["launches"]]
        assert outcomes[0] == "lost" and second["state"] == "running"
        escapee = harness.events(records, "escapee", "o")[-1]["escapee"]
        assert _alive(escapee)
    finally:
        daemon.stop()
    assert daemon.wait_exit() == 0
    # After shutdown no process of any launch runs: the job (group kill) and its escaped helper (swept).
    assert not _alive(escapee)
    assert harness.leftover_processes(str(workdir)) == []


# --- 1. a daemon crash is never a job failure --------------------------------------------------------


def _no_runtime_fault_charged(status: dict[str, Any], client: RuntimeClient, ledger: Path, names: list[str]) -> None:
    """Every job completed once per process, none ran twice at once, none was charged an attempt and no
    launch of any was recorded lost or failed."""
    jobs = {job["id"]: job for job in status["jobs"]}
    assert {name: jobs[name]["state"] for name in names} == dict.fromkeys(names, "completed")
    assert {name: jobs[name]["attempts"] for name in names} == dict.fromkeys(names, 0)
    records = harness.read_ledger(ledger)
    assert harness.events(records, "double") == [], "a job ran twice at the same time"
    for name in names:
        launches = client.job(name)["launches"]
        outcomes = [launch["outcome"] for launch in launches]
        assert "lost" not in outcomes and "failed" not in outcomes, (name, outcomes)
        assert outcomes.count("completed") == 1, (name, outcomes)
        # The completing launch ran each of its processes to the end exactly once. (A rank of a
        # rolled-back gang may have finished on its own before: the stand-in does not wait for its
        # peers as a real gang's rendezvous would.)
        completed = next(launch for launch in launches if launch["outcome"] == "completed")
        ranks = Counter(e["node_rank"] for e in harness.events(records, "done", name) if e["launch"] == completed["id"])
        assert ranks == Counter({str(r): 1 for r in range(len(completed["procs"]))}), (name, ranks)


def test_a_half_started_cross_node_gang_is_rolled_back_without_charging_an_attempt(workdir: Path) -> None:
    state, ledger, locks = workdir / "s", workdir / "ledger", workdir / "locks"
    locks.mkdir()
    # The daemon SIGKILLs itself after starting rank 0 of the gang and before rank 1 (and before
    # recording any pid); with max_retries 0 a single charged attempt would fail the job for good.
    daemon = harness.DaemonProcess(state, "--fake-gpus", "2x2").start("--debug-crash-after-launches", "1")
    daemon.client.submit(
        harness.job_spec("g", iterations=40, alpha=0.02, num_gpus=2, max_retries=0, ledger=ledger, lock_dir=locks)
    )
    with contextlib.suppress(DaemonUnavailable):  # the pass it wakes may kill the daemon before it answers
        daemon.client.apply([{"job_id": "g", "gpus": [[0, 0], [1, 0]]}])
    assert daemon.wait_exit(timeout=30) == -harness.signal.SIGKILL
    daemon.start()
    try:
        status = daemon.client.wait_until(
            lambda s: all(j["state"] in ("completed", "failed") for j in s["jobs"]), timeout=90
        )
        assert status["daemon"]["recovered"] == {"adopted": 0, "not_started": 0, "rolled_back": 1}
        _no_runtime_fault_charged(status, daemon.client, ledger, ["g"])
        outcomes = [launch["outcome"] for launch in daemon.client.job("g")["launches"]]
        assert outcomes == ["rolled-back", "completed"]
        # The rolled-back rank 0 had started (and was stopped); rank 1 of that launch never ran.
        first = daemon.client.job("g")["launches"][0]["id"]
        assert [
            e["node_rank"] for e in harness.events(harness.read_ledger(ledger), "start") if e["launch"] == first
        ] == ["0"]
    finally:
        daemon.stop()


@pytest.mark.parametrize("seed", [2, pytest.param(0, marks=pytest.mark.slow), pytest.param(1, marks=pytest.mark.slow)])
def test_repeated_daemon_kills_lose_nothing_double_nothing_and_charge_nothing(workdir: Path, seed: int) -> None:
    """The audit's crash study as a test: the daemon is SIGKILLed N times, at launch boundaries (after
    k process spawns, before any pid is recorded, half-way through gangs) and at random moments while
    jobs run; every job has ``max_retries: 0``, so one attempt charged for a runtime fault fails it."""
    rng = random.Random(seed)
    state, ledger, locks = workdir / "s", workdir / "ledger", workdir / "locks"
    locks.mkdir()
    names = [f"k{i}" for i in range(6)]
    daemon = harness.DaemonProcess(state, "--fake-gpus", "2x2")
    daemon.start()
    for i, name in enumerate(names):
        gang = i % 3 == 0  # two gangs across both nodes, four single-GPU jobs
        daemon.client.submit(
            harness.job_spec(
                name,
                iterations=rng.randint(20, 40),
                alpha=0.02,
                num_gpus=2 if gang else 1,
                max_retries=0,
                ledger=ledger,
                lock_dir=locks,
            )
        )
    # Every GPU holds one gang and one single job (capacity 2).
    places = {"k0": [[0, 0], [1, 0]], "k3": [[0, 1], [1, 1]], "k1": [[0, 0]], "k2": [[0, 1]], "k4": [[1, 0]]}
    daemon.client.apply([{"job_id": name, "gpus": places.get(name, [[1, 1]])} for name in names])
    daemon.kill()
    kills = 1
    # At launch boundaries: each restart dies after its k-th process spawn.
    for k in (rng.randint(1, 3) for _ in range(4)):
        daemon.start("--debug-crash-after-launches", str(k), wait=False)
        try:
            daemon.wait_exit(timeout=20)
        except harness.subprocess.TimeoutExpired:  # nothing left to start: it did not reach k spawns
            daemon.kill()
        kills += 1
    # At random moments while jobs run.
    for _ in range(3):
        daemon.start()
        time.sleep(rng.uniform(0.05, 0.6))
        daemon.kill()
        kills += 1
    daemon.start()
    try:
        status = daemon.client.wait_until(
            lambda s: all(j["state"] in ("completed", "failed", "cancelled") for j in s["jobs"]), timeout=120
        )
        assert kills == 8
        _no_runtime_fault_charged(status, daemon.client, ledger, names)
        recovered = [
            e["message"] for name in names for e in daemon.client.job(name)["events"] if e["kind"] == "recovered"
        ]
        assert any("re-adopted" in message for message in recovered)  # kills hit running jobs too
    finally:
        daemon.stop()


# --- 6. safe start and stop --------------------------------------------------------------------------


def _refused(state: Path, *args: str) -> str:
    """Start a daemon that must be refused: exit 2, one line on stderr, no traceback, no process left."""
    result = harness.subprocess.run(
        harness.daemon_command(state, "--fake-gpus", "2x1", *args),
        env=harness.runtime_env(),
        cwd=harness.REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.stderr, result.stderr
    assert harness.mps_pids(state) == [], "a refused start left an MPS control daemon running"
    return lines[0]


def test_refused_starts_are_one_line_and_leave_nothing_running(workdir: Path) -> None:
    state = workdir / "s"
    assert "--token-file" in _refused(state, "--listen", "127.0.0.1:0")
    token = workdir / "token"
    token.write_text("secret\n")
    token.chmod(0o644)
    assert "chmod 600" in _refused(state, "--listen", "127.0.0.1:0", "--token-file", str(token))
    # A corrupt database is named and refused (never replaced), with the way out.
    broken = workdir / "broken"
    broken.mkdir()
    (broken / "state.db").write_bytes(b"this is not a database" * 100)
    message = _refused(broken)
    assert str(broken / "state.db") in message and ".corrupt" in message
    assert (broken / "state.db").read_bytes() == b"this is not a database" * 100
    # A socket path naming someone's regular file is refused, not deleted.
    victim = workdir / "notes.txt"
    victim.write_text("keep me")
    config = workdir / "runtime.json"
    config.write_text(json.dumps({"socket_path": str(victim)}))
    assert "not a socket" in _refused(state, "--config", str(config))
    assert victim.read_text() == "keep me"
    # No Ray cluster at the address: how to start one, at once (ray.init would retry for minutes).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    message = _refused(state, "--backend", "ray", "--ray-address", f"127.0.0.1:{closed}")
    assert "ray start --head" in message


def test_jobs_get_an_allow_listed_environment_and_a_public_listener_warns(workdir: Path) -> None:
    state, token, dump = workdir / "s", workdir / "token", workdir / "env.json"
    daemon = harness.DaemonProcess(
        state,
        "--fake-gpus",
        "1x1",
        "--listen",
        "0.0.0.0:0",
        "--token-file",
        str(token),
        env={"AWS_SECRET_ACCESS_KEY": "s3cr3t", "DUETTO_TEST_SECRET": "x", "LC_ALL": "C"},
    )
    daemon.start(wait=False)
    try:
        deadline = time.monotonic() + 60
        while not (state / "api-address").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        port = (state / "api-address").read_text().strip().rpartition(":")[2]
        daemon.client = RuntimeClient(address=f"127.0.0.1:{port}", token=token.read_text().strip())
        status = daemon.client.status()
        assert any("plain HTTP" in w for w in status["daemon"]["warnings"])
        assert "plain HTTP" in daemon.log.read_text()
        code = f"import json, os; open({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))"
        spec = {**harness.job_spec("env"), "command": [sys.executable, "-c", code], "env": {"MINE": "1"}}
        daemon.client.submit(spec)
        daemon.client.apply([{"job_id": "env", "gpus": [0]}])
        daemon.client.wait_until(lambda s: _job(s, "env")["state"] == "completed", 30)
        env = json.loads(dump.read_text())
        assert "AWS_SECRET_ACCESS_KEY" not in env and "DUETTO_TEST_SECRET" not in env
        assert env["MINE"] == "1" and env["LC_ALL"] == "C" and env["PATH"]
        assert env["DUETTO_JOB_ID"] == "env" and env["CUDA_VISIBLE_DEVICES"] == "GPU-fake-n0-0"
    finally:
        daemon.stop()


def test_a_node_refuses_a_missing_workdir_as_the_jobs_fault(workdir: Path) -> None:
    """On Ray the submit cannot see the nodes' folders: the node names the problem (charged to the job,
    which then fails with that reason) instead of a wrapper dying without an exit status ('lost')."""
    from cluster_runtime.agent import NodeAgent

    agent = NodeAgent(3, {"mode": "off", "pipe_dir": str(workdir / "p"), "log_dir": str(workdir / "l")}, gpus=[])
    request = {
        "launch_id": "w.1",
        "run_dir": str(workdir / "runs" / "w" / "w.1" / "rank0"),
        "argv": [sys.executable, "-c", "pass"],
        "env": {"DUETTO_JOB_ID": "w", "DUETTO_LAUNCH_ID": "w.1", "DUETTO_ATTEMPT": "1"},
        "workdir": str(workdir / "gone"),
        "gpu_uuids": [],
        "thread_percentage": None,
    }
    try:
        [answer] = agent.launch_many([request])
    finally:
        agent.close()
    assert answer == {"error": f"workdir {str(workdir / 'gone')!r} is not a directory on node 3", "job_fault": True}
