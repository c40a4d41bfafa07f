"""Runtime hardening (issue 17), against real daemons, real job processes and the stand-in MPS program:
strict request validation, a client that holds under concurrency, contained job processes, crash
recovery that never charges a job for the runtime's own faults, safe start and stop."""

from __future__ import annotations

import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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
