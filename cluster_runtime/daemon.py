"""The daemon: state + backend + reconcile loop + local API.

``duetto daemon --backend local|ray [--state PATH]`` runs :func:`run_daemon`. One daemon per state
directory (an ``flock`` on ``daemon.lock`` enforces it, and is released by the kernel if the daemon
dies). The main thread runs the reconcile loop: a pass every ``reconcile_interval_s`` and at once
after every API request that changes the desired state. ``SIGTERM``/``SIGINT`` or ``duetto shutdown``
stop it cleanly: running jobs are stopped (their progress kept, they stay planned and resume when the
daemon starts again) and every node's MPS control daemon is told to ``quit``. With
``--leave-running`` jobs and MPS keep running and the next daemon re-adopts them, as after a crash.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import ipaddress
import json
import logging
import os
import signal
import stat
import threading
import time
from pathlib import Path
from typing import IO, Any

from cluster_runtime.api import ApiServer, read_or_create_token
from cluster_runtime.backends import Backend, make_backend
from cluster_runtime.config import LOCK_NAME, RuntimeConfig
from cluster_runtime.reconciler import Reconciler
from cluster_runtime.spec import plan_from_dict
from cluster_runtime.store import Store
from formulation.errors import DuettoInputError
from heuristics.core import Policy

log = logging.getLogger(__name__)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_policy(name: str | None) -> Policy | None:
    """A policy by registry name (``heuristics.make_policy``) or as ``module:callable``."""
    if name is None:
        return None
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as error:
            raise DuettoInputError(f"cannot load policy {name!r}: {error}", field="policy") from None
        policy = factory()
        return policy
    try:
        heuristics = importlib.import_module("heuristics")
        make_policy = heuristics.make_policy
    except (ImportError, AttributeError):
        raise DuettoInputError(
            "the policy registry (heuristics.make_policy) is not available; give a policy as module:callable",
            field="policy",
        ) from None
    return make_policy(name)


def _query_int(query: dict[str, list[str]], name: str, default: int) -> int:
    """A non-negative integer query parameter, or a 400 naming it."""
    values = query.get(name)
    if not values:
        return default
    text = values[-1]
    if not text.isdigit() or len(text) > 18:
        raise DuettoInputError(f"query parameter '{name}' must be a non-negative integer, got {text!r}")
    return int(text)


def _query_choice(query: dict[str, list[str]], name: str, choices: tuple[str, ...]) -> str:
    values = query.get(name)
    if not values:
        return choices[0]
    if values[-1] not in choices:
        raise DuettoInputError(f"query parameter '{name}' must be one of {', '.join(choices)}, got {values[-1]!r}")
    return values[-1]


def _leave_running(body: Any) -> bool:
    """The shutdown body: ``{}`` or ``{"leave_running": true|false}``, a JSON boolean (``"false"`` is
    not false)."""
    if body in (None, {}):
        return False
    if not isinstance(body, dict):
        raise DuettoInputError(f"expected a JSON object, got {type(body).__name__}", source="shutdown")
    unknown = sorted(set(body) - {"leave_running"})
    if unknown:
        raise DuettoInputError(f"unknown field '{unknown[0]}'", source="shutdown", field=unknown[0])
    value = body.get("leave_running", False)
    if not isinstance(value, bool):
        raise DuettoInputError(
            f"must be true or false, got {json.dumps(value)}", source="shutdown", field="leave_running"
        )
    return value


class StateLock:
    """An exclusive ``flock`` on ``<state>/daemon.lock``: one daemon per state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the daemon's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise DuettoInputError(
                f"another daemon (pid {holder or '?'}) already runs on this state directory",
                source=str(self.path),
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


class Daemon:
    """A running daemon (construct, then :meth:`serve`); usable in-process for tests and benchmarks.

    Parameters
    ----------
    config
        Settings.
    backend
        A ready backend (default: made from ``config``).
    policy
        A policy object (default: ``config.policy`` resolved).
    serve_api
        ``False`` to skip the socket (benchmarks drive the reconciler directly).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        backend: Backend | None = None,
        policy: Policy | None = None,
        serve_api: bool = True,
    ) -> None:
        self.config = config
        config.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(config.state_dir, 0o700)
        self.lock = StateLock(config.state_dir)
        self.lock.acquire()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.leave_running = False
        self.api: ApiServer | None = None
        self.warnings: list[str] = []
        started: Backend | None = None
        try:
            # Every setting that can be refused is checked before anything starts (no MPS daemon or
            # agent is left behind by a refused start).
            self._listen, self._token = self._check_api_settings() if serve_api else (None, None)
            self.store = Store(config.db_path)
            self.backend = backend or make_backend(config)
            started = self.backend  # from here on, a failure undoes what start() did on any node
            self.backend.start()
            chosen = policy if policy is not None else resolve_policy(config.policy)
            self.reconciler = Reconciler(self.store, self.backend, config, chosen)
            self.recovered = self.reconciler.recover()
            if serve_api:
                self.api = self._make_api()
                # Where clients find us (a TCP port 0 becomes a real port only now).
                (config.state_dir / "api-address").write_text(self.api.address + "\n", encoding="utf-8")
        except BaseException:
            if started is not None:
                self._undo_start(started)
            self.lock.release()
            raise
        for warning in self.warnings:
            log.warning(warning)
            with self.store.transaction() as tx:
                tx.event(time.time(), "warning", None, warning)
        self.started_at = time.time()
        log.info(
            "duetto daemon up: backend %s, %d node(s) x %d GPU(s), recovered %s",
            self.backend.name,
            len(self.backend.inventory.nodes),
            self.backend.inventory.gpus_per_node,
            self.recovered,
        )

    def _make_api(self) -> ApiServer:
        routes: dict[tuple[str, str], Any] = {
            ("GET", "health"): lambda body, query, ids: {"ok": True, "pid": os.getpid()},
            ("GET", "status"): lambda body, query, ids: self.status(),
            ("POST", "jobs"): lambda body, query, ids: self._changed(self.reconciler.submit(body, source="job")),
            ("GET", "jobs/item"): lambda body, query, ids: self.reconciler.job_detail(ids[0]),
            ("POST", "jobs/cancel"): lambda body, query, ids: self._changed(self.reconciler.cancel(ids[0])),
            ("GET", "jobs/logs"): lambda body, query, ids: {
                "log": self.reconciler.logs(
                    ids[0],
                    _query_choice(query, "stream", ("stdout", "stderr")),
                    _query_int(query, "tail", 65536),
                    _query_int(query, "rank", 0),
                )
            },
            ("POST", "plan"): lambda body, query, ids: self._changed(self._apply(body)),
            ("POST", "reconcile"): lambda body, query, ids: self._reconcile_now(),
            ("POST", "shutdown"): lambda body, query, ids: self.request_stop(_leave_running(body)),
        }
        if self._listen is not None:
            return ApiServer(routes, listen=self._listen, token=self._token)
        return ApiServer(routes, socket_path=self.config.socket)

    def _check_api_settings(self) -> tuple[tuple[str, int] | None, str | None]:
        """The TCP address and token (or ``None``s for the unix socket), refused or warned about here."""
        config = self.config
        if not config.listen:
            socket_path = config.socket
            if socket_path.exists() and not stat.S_ISSOCK(socket_path.lstat().st_mode):
                raise DuettoInputError(
                    "exists and is not a socket; refusing to replace it (choose another socket_path or remove it)",
                    source=str(socket_path),
                    field="socket_path",
                )
            return None, None
        host, _, port = config.listen.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        if not port.isdigit() or int(port) > 65535:
            raise DuettoInputError(f"expected HOST:PORT, got {config.listen!r}", field="listen")
        if not config.token_file:
            raise DuettoInputError("--listen needs --token-file (TCP is only served with a token)", field="listen")
        token = read_or_create_token(config.token_file)
        if not _is_loopback(host):
            self.warnings.append(
                f"the API listens on {host}:{port} over plain HTTP: the bearer token crosses the network "
                "unencrypted. Listen on 127.0.0.1 behind a TLS reverse proxy (docs/runtime.md) or use the unix socket"
            )
        return (host, int(port)), token

    def _undo_start(self, backend: Backend) -> None:
        """A start refused after the nodes came up: quit what this start began (MPS, agents), but
        never under jobs a previous daemon left running."""
        try:
            with self.store.read() as tx:
                busy = bool(tx.active_launches())
        except Exception:
            busy = True
        try:
            backend.shutdown(quit_mps=not busy)
        except Exception as error:
            log.warning("undoing the start failed: %s", error)

    def _apply(self, body: Any) -> dict[str, Any]:
        """A plan, or a schedule (``"format": "duetto-schedule"``, e.g. the oracle's) to replay."""
        if isinstance(body, dict) and body.get("format") == "duetto-schedule":
            return self.reconciler.apply_schedule(body)
        return self.reconciler.apply(plan_from_dict(body), source="operator")

    def _changed(self, result: dict[str, Any]) -> dict[str, Any]:
        self._wake.set()
        return result

    def _reconcile_now(self) -> dict[str, Any]:
        stats = self.reconciler.reconcile()
        return dict(stats.__dict__)

    def status(self) -> dict[str, Any]:
        status = self.reconciler.status()
        status["daemon"] = {
            "pid": os.getpid(),
            "state_dir": str(self.config.state_dir),
            "api": None if self.api is None else self.api.address,
            "started_at": self.started_at,
            "recovered": self.recovered,
            "warnings": list(self.warnings),
        }
        return status

    def request_stop(self, leave_running: bool = False) -> dict[str, Any]:
        self.leave_running = leave_running
        self._stop.set()
        self._wake.set()
        return {"stopping": True, "leave_running": leave_running}

    def serve(self, install_signals: bool = True) -> None:
        """Run the reconcile loop until asked to stop, then shut down."""
        if install_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: self.request_stop(False))
        if self.api is not None:
            self.api.start()
        try:
            while not self._stop.is_set():
                try:
                    self.reconciler.reconcile()
                except Exception:  # one bad pass must not end the daemon; the next pass retries
                    log.exception("reconcile pass failed")
                self._wake.wait(self.config.reconcile_interval_s)
                self._wake.clear()
        finally:
            self.close()

    def close(self) -> None:
        """Stop the API, then (unless leaving jobs running) stop jobs and quit MPS; release the state."""
        if self.api is not None:
            with contextlib.suppress(Exception):
                self.api.close()
            self.api = None
        try:
            if not self.leave_running:
                self.reconciler.stop_everything(self.config.stop_grace_s)
                # Containment: no process of any launch outlives the daemon's shutdown (a child that
                # left its job's session, an orphan whose wrapper was killed).
                try:
                    swept = self.backend.sweep(str(self.config.runs_dir))
                except Exception as error:  # a node that does not answer must not stop the shutdown
                    log.warning("sweeping job processes failed: %s", error)
                else:
                    if swept:
                        log.warning("killed %d job process(es) left after stopping every launch", len(swept))
            self.backend.shutdown(quit_mps=not self.leave_running)
        finally:
            self.store.close()
            self.lock.release()


def run_daemon(config: RuntimeConfig) -> None:
    """Entry point of ``duetto daemon``."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    daemon = Daemon(config)
    where = daemon.api.address if daemon.api is not None else "-"
    log.info("listening on %s", where)
    daemon.serve()
