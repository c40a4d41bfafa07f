"""The daemon's local API: JSON over HTTP on a unix socket (mode 0600) or, when asked, on TCP with a
bearer token.

Routes (all JSON):

=======  ==============================  =====================================================
GET      /v1/health                      ``{"ok": true, "pid": ...}``
GET      /v1/status                      jobs, nodes, GPUs, MPS, current plan, recent events
POST     /v1/jobs                        submit a job spec → ``{"job_id", "arrival"}``, or a list of
                                         them, all or none → ``{"jobs": [{"job_id", "arrival"}, ...]}``
GET      /v1/jobs/ID                     one job with its launches and events
POST     /v1/jobs/ID/cancel              cancel a job
GET      /v1/jobs/ID/logs?stream=&tail=  the latest launch's stdout/stderr (text in ``"log"``)
POST     /v1/plan                        apply a plan → ``{"plan_id", "entries"}`` or 400
POST     /v1/reconcile                   run one reconcile pass now → its statistics
POST     /v1/shutdown                    ``{"leave_running": false}``
=======  ==============================  =====================================================

User mistakes (bad spec, rejected plan, unknown job) answer 400 with ``{"error": message}``; a
rejected plan adds ``"problems"``.
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import json
import logging
import os
import random
import secrets
import socket
import socketserver
import stat
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cluster_runtime.plan import PlanRejected
from formulation.errors import DuettoInputError

log = logging.getLogger(__name__)

MAX_BODY = 16 * 2**20
UNIX_PATH_MAX = 107
#: Pending connections the kernel queues while every handler is busy (capped by net.core.somaxconn).
LISTEN_BACKLOG = 1024
#: Requests served at once; further connections wait in the backlog (bounded threads and memory).
MAX_HANDLERS = 64
#: Seconds a connection may take to send its request (and to read the answer).
REQUEST_TIMEOUT_S = 10.0

Route = Callable[[dict[str, Any], dict[str, list[str]], list[str]], Any]


class DaemonUnavailable(ConnectionError):
    """No daemon answers at the given socket or address (or it stayed busy past the connect timeout)."""


class DaemonError(RuntimeError):
    """The daemon answered with an error that is not the request's fault (5xx, 401)."""


def read_or_create_token(path: Path) -> str:
    """The token in ``path``; a new random one (file mode 0600) if the file does not exist."""
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            # Whoever can read the token can run any command as the daemon's user: refuse it.
            raise DuettoInputError(
                f"token file is readable or writable by others (mode {mode:04o}); run 'chmod 600 {path}'",
                source=str(path),
            )
        token = path.read_text(encoding="utf-8").strip()
        if not token:
            raise DuettoInputError("token file is empty", source=str(path))
        return token
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _Handler(BaseHTTPRequestHandler):
    server: _ServerMixin  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"
    # A socket timeout for every read and write of a connection: a client that stops sending (or
    # never reads) frees its handler thread after this long instead of pinning it.
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("api: " + format, *args)

    def address_string(self) -> str:  # unix sockets have no client address
        return "local"

    def _send(self, code: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, code: int, message: str) -> None:
        """Answer an unreadable request and close the connection (its body, if any, is not read)."""
        self.close_connection = True
        self._send(code, {"error": message})

    def _body(self) -> tuple[bool, Any]:
        """``(ok, parsed body)``; on a bad request the answer is already sent."""
        raw_length = self.headers.get("Content-Length")
        if raw_length is None or raw_length.strip() == "":
            length = 0
        elif not raw_length.strip().isdigit():  # "-1", "abc", "1e3": refused, never read until EOF
            self._refuse(400, f"Content-Length must be a non-negative integer, got {raw_length!r}")
            return False, None
        else:
            length = int(raw_length)
        if length > MAX_BODY:
            self._refuse(413, f"request body over {MAX_BODY} bytes")
            return False, None
        if not length:
            return True, {}
        try:
            data = self.rfile.read(length)
        except TimeoutError:
            self._refuse(408, f"request body not received within {self.timeout} s")
            return False, None
        if len(data) < length:
            self._refuse(400, f"request body ended after {len(data)} of {length} bytes")
            return False, None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            self._refuse(400, f"request body is not valid UTF-8 (byte {error.start})")
            return False, None
        try:
            return True, json.loads(text, parse_constant=_no_constant)
        except ValueError as error:  # JSONDecodeError, and NaN/Infinity
            self._send(400, {"error": f"malformed JSON body: {error}"})
            return False, None

    def _handle(self, method: str) -> None:
        token = self.server.token
        if token is not None:
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                self._refuse(401, "missing or wrong token")
                return
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        segments = [s for s in parts.path.split("/") if s]
        ok, body = self._body()
        if not ok:
            return
        try:
            result = self.server.dispatch(method, segments, body, query)
        except KeyError:
            self._send(404, {"error": f"no route {method} {parts.path}"})
        except PlanRejected as error:
            self._send(400, {"error": str(error), "problems": error.problems})
        except DuettoInputError as error:
            self._send(400, {"error": " ".join(str(error).split())})
        except Exception as error:  # the daemon must answer, not die, on a bug in one request
            log.exception("API %s %s failed", method, parts.path)
            self._send(500, {"error": f"internal error: {error}"})
        else:
            self._send(200, result)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class _ServerMixin:
    token: str | None
    routes: dict[tuple[str, str], Route]
    request_queue_size = LISTEN_BACKLOG
    _slots: threading.BoundedSemaphore

    def process_request(self, request: Any, client_address: Any) -> None:
        # At most MAX_HANDLERS threads: the accept loop waits for a free slot, so excess clients queue
        # in the listen backlog instead of each getting a thread.
        if not hasattr(self, "_slots"):
            self._slots = threading.BoundedSemaphore(MAX_HANDLERS)
        self._slots.acquire()
        try:
            super().process_request(request, client_address)  # type: ignore[misc]
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self._slots.release()

    def dispatch(self, method: str, segments: list[str], body: Any, query: dict[str, list[str]]) -> Any:
        """Route ``/v1/<name>[/<id>[/<action>]]`` to a handler ``(body, query, ids)``."""
        if len(segments) < 2 or segments[0] != "v1":
            raise KeyError(segments)
        name, ids = segments[1], segments[2:]
        action = ids[1] if len(ids) > 1 else ("item" if ids else "")
        return self.routes[(method, f"{name}/{action}" if action else name)](body, query, ids)


class _UnixServer(_ServerMixin, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        path = str(self.server_address)
        try:
            mode: int | None = os.lstat(path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None:
            # A stale socket of an earlier daemon is replaced (the state lock says none runs); anything
            # else at that path is someone's file: never delete it.
            if not stat.S_ISSOCK(mode):
                raise DuettoInputError(
                    "exists and is not a socket; refusing to replace it (choose another --socket or remove it)",
                    source=path,
                    field="socket_path",
                )
            os.unlink(path)
        # Create the socket already 0600: no window in which another user could connect.
        old = os.umask(0o177)
        try:
            self.socket.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)


class _TcpServer(_ServerMixin, socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class ApiServer:
    """Serves ``routes`` on a unix socket, or on ``host:port`` with a token."""

    def __init__(
        self,
        routes: dict[tuple[str, str], Route],
        socket_path: Path | None = None,
        listen: tuple[str, int] | None = None,
        token: str | None = None,
    ) -> None:
        self.server: _UnixServer | _TcpServer
        if listen is not None:
            if not token:
                raise DuettoInputError("a TCP listener needs a token (--token-file)", field="listen")
            self.server = _TcpServer(listen, _Handler)
            self.server.token = token
            host, port = self.server.server_address[:2]
            self.address = f"{host!s}:{port}"
        else:
            assert socket_path is not None
            if len(str(socket_path)) > UNIX_PATH_MAX:
                raise DuettoInputError(
                    f"socket path is {len(str(socket_path))} characters, over the unix limit of {UNIX_PATH_MAX}; "
                    "use a shorter --state or --socket",
                    source=str(socket_path),
                )
            self.server = _UnixServer(str(socket_path), _Handler)
            self.server.token = None
            self.address = str(socket_path)
        self.server.routes = routes
        self._thread = threading.Thread(target=self.server.serve_forever, name="duetto-api", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if isinstance(self.server, _UnixServer):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class RuntimeClient:
    """Talks to a daemon: ``RuntimeClient(socket_path=...)`` or
    ``RuntimeClient(address="127.0.0.1:9999", token=...)``.

    Safe to share between threads (every request opens its own connection). A daemon that is busy
    (its listen backlog full: ``EAGAIN`` on a unix socket, a slow TCP handshake) is retried with
    exponential back-off and jitter for ``connect_timeout`` seconds; a daemon that is not there
    (no socket, connection refused) raises :class:`DaemonUnavailable` at once. ``timeout`` bounds
    each request once connected.
    """

    def __init__(
        self,
        socket_path: str | Path | None = None,
        address: str | None = None,
        token: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
    ) -> None:
        if socket_path is None and address is None:
            raise ValueError("give socket_path or address")
        self.socket_path = None if socket_path is None else str(socket_path)
        self.address = address
        self.token = token
        self.timeout = timeout
        self.connect_timeout = connect_timeout

    def _connection(self) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            return _UnixConnection(self.socket_path, self.timeout)
        assert self.address is not None
        host, _, port = self.address.rpartition(":")
        return http.client.HTTPConnection(host, int(port), timeout=self.timeout)

    def _where(self) -> str:
        return str(self.socket_path or self.address)

    def _connect(self) -> http.client.HTTPConnection:
        """An open connection, retrying while the daemon is busy."""
        deadline = time.monotonic() + self.connect_timeout
        delay = 0.005
        while True:
            connection = self._connection()
            try:
                connection.connect()
                return connection
            except (BlockingIOError, InterruptedError, TimeoutError) as error:
                # The backlog is full (or the handshake slow): the daemon is there but busy.
                connection.close()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DaemonUnavailable(
                        f"the duetto daemon at {self._where()} stayed busy for {self.connect_timeout:g} s "
                        f"({error.__class__.__name__})"
                    ) from None
                time.sleep(min(left, delay * (0.5 + random.random())))
                delay = min(delay * 2, 0.25)
            except OSError as error:  # no socket file, refused, unreachable: nobody is there
                connection.close()
                raise DaemonUnavailable(
                    f"no duetto daemon answers at {self._where()} ({error.__class__.__name__})"
                ) from None

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One request; raises :class:`DuettoInputError` with the daemon's message on a 400,
        :class:`DaemonUnavailable` when no daemon answers, :class:`DaemonError` on a 5xx or 401."""
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        payload = None if body is None else json.dumps(body).encode()
        connection = self._connect()
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except TimeoutError:
            raise DaemonUnavailable(
                f"the duetto daemon at {self._where()} did not answer within {self.timeout:g} s"
            ) from None
        except (OSError, http.client.HTTPException) as error:  # reset, broken pipe, closed mid-answer
            raise DaemonUnavailable(
                f"the connection to the duetto daemon at {self._where()} was lost ({error.__class__.__name__})"
            ) from None
        finally:
            connection.close()
        try:
            decoded = json.loads(data) if data else None
        except json.JSONDecodeError:
            decoded = {"error": data.decode(errors="replace")}
        if response.status == 200:
            return decoded
        message = decoded.get("error") if isinstance(decoded, dict) else str(decoded)
        if response.status in (400, 404, 408, 413):
            raise DuettoInputError(str(message))
        raise DaemonError(f"daemon answered {response.status}: {message}")

    # --- the operations ------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/health"))

    def status(self) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/status"))

    def submit(self, spec: dict[str, Any] | list[dict[str, Any]]) -> dict[str, Any]:
        """Submit one spec, or a list of them all or none (``{"jobs": [...]}`` back)."""
        return dict(self.request("POST", "/v1/jobs", spec))

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/v1/jobs/{job_id}"))

    def cancel(self, job_id: str) -> dict[str, Any]:
        return dict(self.request("POST", f"/v1/jobs/{job_id}/cancel", {}))

    def logs(self, job_id: str, stream: str = "stdout", tail: int = 65536, rank: int = 0) -> str:
        answer = self.request("GET", f"/v1/jobs/{job_id}/logs?stream={stream}&tail={tail}&rank={rank}")
        return str(answer["log"])

    def apply(self, plan: Any) -> dict[str, Any]:
        return dict(self.request("POST", "/v1/plan", plan))

    def reconcile(self) -> dict[str, Any]:
        return dict(self.request("POST", "/v1/reconcile", {}))

    def shutdown(self, leave_running: bool = False) -> dict[str, Any]:
        return dict(self.request("POST", "/v1/shutdown", {"leave_running": leave_running}))

    def wait_until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0, interval: float = 0.1
    ) -> dict[str, Any]:
        """Poll ``status`` until ``predicate(status)`` holds; raises ``TimeoutError`` with the last status."""
        deadline = time.monotonic() + timeout
        status = self.status()
        while not predicate(status):
            if time.monotonic() > deadline:
                states = {job["id"]: job["state"] for job in status.get("jobs", [])}
                raise TimeoutError(f"condition not met in {timeout} s; job states: {states}")
            time.sleep(interval)
            status = self.status()
        return status
