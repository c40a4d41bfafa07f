"""The daemon's state in SQLite (WAL mode): jobs, plans, the desired assignment, launches with pid and
process start time, events, measured profiles and interference ratios.

Every decision is written before it is carried out (a launch row exists before its process), so a
daemon that restarts after a crash can tell what it was doing: see ``Reconciler.recover``.
WAL with ``synchronous=NORMAL`` is durable across process crashes (not across power loss, where the
last transactions may be lost; the recovery logic then still never starts a job twice because it
looks for processes by launch id).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formulation.errors import DuettoInputError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    arrival REAL NOT NULL,
    progress REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_retries INTEGER NOT NULL,
    first_start REAL,
    finished_at REAL,
    attained_service REAL NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS plans (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    source TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS desired (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id),
    gpus TEXT NOT NULL,
    steps INTEGER NOT NULL,
    position INTEGER NOT NULL,
    plan_id INTEGER
);
CREATE TABLE IF NOT EXISTS launches (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    attempt INTEGER NOT NULL,
    gpus TEXT NOT NULL,
    steps INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    stop_requested_at REAL,
    force_sent INTEGER NOT NULL DEFAULT 0,
    ended_at REAL,
    exit_code INTEGER,
    outcome TEXT,
    start_progress REAL NOT NULL DEFAULT 0,
    thread_percentage INTEGER,
    pending_outcome TEXT
);
CREATE INDEX IF NOT EXISTS launches_state ON launches(state);
CREATE INDEX IF NOT EXISTS launches_job ON launches(job_id);
CREATE TABLE IF NOT EXISTS procs (
    launch_id TEXT NOT NULL REFERENCES launches(id),
    rank INTEGER NOT NULL,
    node INTEGER NOT NULL,
    pid INTEGER,
    proc_start TEXT,
    run_dir TEXT NOT NULL,
    PRIMARY KEY (launch_id, rank)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    job_id TEXT,
    message TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS profiles (
    name TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    measured_at REAL NOT NULL,
    source TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS interference (
    victim TEXT NOT NULL,
    other TEXT NOT NULL,
    xi REAL NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (victim, other)
);
"""

ACTIVE_LAUNCH_STATES = ("starting", "running", "stopping")
FINISHED_JOB_STATES = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class JobRow:
    id: str
    seq: int
    spec: dict[str, Any]
    state: str
    submitted_at: float
    arrival: float
    progress: float
    attempts: int
    max_retries: int
    first_start: float | None
    finished_at: float | None
    attained_service: float
    not_before: float
    last_error: str | None


@dataclass(frozen=True, slots=True)
class ProcRow:
    launch_id: str
    rank: int
    node: int
    pid: int | None
    proc_start: str | None
    run_dir: str


@dataclass(frozen=True, slots=True)
class LaunchRow:
    id: str
    job_id: str
    attempt: int
    gpus: tuple[int, ...]
    steps: int
    state: str
    created_at: float
    started_at: float | None
    stop_requested_at: float | None
    force_sent: bool
    ended_at: float | None
    exit_code: int | None
    outcome: str | None
    start_progress: float
    thread_percentage: int | None
    pending_outcome: str | None


class Store:
    """Thread-safe access to the state database (one connection, one lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA busy_timeout=30000")
            with self.transaction() as tx:
                tx.executescript_safe(_SCHEMA)
                if tx.meta("schema_version") is None:
                    tx.set_meta("schema_version", str(SCHEMA_VERSION))
            check = self._conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(str(check))
        except sqlite3.DatabaseError as error:
            # Refuse rather than start from nothing: the file may describe jobs that still run.
            self._conn.close()
            raise DuettoInputError(
                f"the state database is unreadable ({error}); the daemon refuses to start on it. Keep it for "
                f"inspection and start afresh: 'mv {self.path} {self.path}.corrupt' (jobs it recorded are "
                "forgotten; stop their processes by hand)",
                source=str(self.path),
            ) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def journal_mode(self) -> str:
        with self._lock:
            return str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """One ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on error)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """Consistent reads (a deferred transaction)."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield Tx(self._conn)
            finally:
                self._conn.execute("COMMIT")


def _job(row: sqlite3.Row) -> JobRow:
    return JobRow(
        id=row["id"],
        seq=row["seq"],
        spec=json.loads(row["spec"]),
        state=row["state"],
        submitted_at=row["submitted_at"],
        arrival=row["arrival"],
        progress=row["progress"],
        attempts=row["attempts"],
        max_retries=row["max_retries"],
        first_start=row["first_start"],
        finished_at=row["finished_at"],
        attained_service=row["attained_service"],
        not_before=row["not_before"],
        last_error=row["last_error"],
    )


def _launch(row: sqlite3.Row) -> LaunchRow:
    return LaunchRow(
        id=row["id"],
        job_id=row["job_id"],
        attempt=row["attempt"],
        gpus=tuple(json.loads(row["gpus"])),
        steps=row["steps"],
        state=row["state"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        stop_requested_at=row["stop_requested_at"],
        force_sent=bool(row["force_sent"]),
        ended_at=row["ended_at"],
        exit_code=row["exit_code"],
        outcome=row["outcome"],
        start_progress=row["start_progress"],
        thread_percentage=row["thread_percentage"],
        pending_outcome=row["pending_outcome"],
    )


class Tx:
    """Queries and updates inside one transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def executescript_safe(self, script: str) -> None:
        # executescript would COMMIT our transaction; run the statements one by one instead.
        for statement in script.split(";"):
            if statement.strip():
                self.conn.execute(statement)

    # --- meta ---------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # --- jobs ---------------------------------------------------------------------------------
    def insert_job(
        self, job_id: str, spec: dict[str, Any], submitted_at: float, arrival: float, max_retries: int
    ) -> None:
        seq = self.conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
        self.conn.execute(
            "INSERT INTO jobs(id, seq, spec, state, submitted_at, arrival, max_retries) "
            "VALUES (?, ?, ?, 'pending', ?, ?, ?)",
            (job_id, seq, json.dumps(spec), submitted_at, arrival, max_retries),
        )

    def job(self, job_id: str) -> JobRow | None:
        row = self.conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else _job(row)

    def jobs(self, states: Iterable[str] | None = None) -> list[JobRow]:
        if states is None:
            rows = self.conn.execute("SELECT * FROM jobs ORDER BY seq").fetchall()
        else:
            wanted = tuple(states)
            marks = ",".join("?" * len(wanted))
            rows = self.conn.execute(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY seq", wanted).fetchall()
        return [_job(r) for r in rows]

    def job_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])

    def update_job(self, job_id: str, **fields: Any) -> None:
        if not fields:
            return
        names = ", ".join(f"{name} = ?" for name in fields)
        self.conn.execute(f"UPDATE jobs SET {names} WHERE id = ?", (*fields.values(), job_id))

    def set_progress(self, items: Iterable[tuple[str, float]]) -> None:
        self.conn.executemany("UPDATE jobs SET progress = MAX(progress, ?) WHERE id = ?", [(p, j) for j, p in items])

    # --- plans / desired ---------------------------------------------------------------------------
    def insert_plan(self, created_at: float, source: str, body: list[dict[str, Any]]) -> int:
        cursor = self.conn.execute(
            "INSERT INTO plans(created_at, source, body) VALUES (?, ?, ?)",
            (created_at, source, json.dumps(body)),
        )
        return int(cursor.lastrowid or 0)

    def latest_plan(self) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM plans ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return None
        return {
            "id": row["id"],
            "created_at": row["created_at"],
            "source": row["source"],
            "entries": json.loads(row["body"]),
        }

    def plan_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM plans").fetchone()[0])

    def replace_desired(self, entries: Iterable[tuple[str, tuple[int, ...], int]], plan_id: int | None) -> None:
        self.conn.execute("DELETE FROM desired")
        self.conn.executemany(
            "INSERT INTO desired(job_id, gpus, steps, position, plan_id) VALUES (?, ?, ?, ?, ?)",
            [(job_id, json.dumps(list(gpus)), steps, i, plan_id) for i, (job_id, gpus, steps) in enumerate(entries)],
        )

    def desired(self) -> dict[str, tuple[tuple[int, ...], int]]:
        rows = self.conn.execute("SELECT job_id, gpus, steps FROM desired ORDER BY position").fetchall()
        return {r["job_id"]: (tuple(json.loads(r["gpus"])), int(r["steps"])) for r in rows}

    def drop_desired(self, job_id: str) -> None:
        self.conn.execute("DELETE FROM desired WHERE job_id = ?", (job_id,))

    # --- launches -----------------------------------------------------------------------------------
    def insert_launch(
        self,
        launch_id: str,
        job_id: str,
        attempt: int,
        gpus: tuple[int, ...],
        steps: int,
        created_at: float,
        start_progress: float,
        thread_percentage: int | None,
        procs: Iterable[tuple[int, int, str]],
    ) -> None:
        self.conn.execute(
            "INSERT INTO launches(id, job_id, attempt, gpus, steps, state, created_at, start_progress, "
            "thread_percentage) VALUES (?, ?, ?, ?, ?, 'starting', ?, ?, ?)",
            (
                launch_id,
                job_id,
                attempt,
                json.dumps(list(gpus)),
                steps,
                created_at,
                start_progress,
                thread_percentage,
            ),
        )
        self.conn.executemany(
            "INSERT INTO procs(launch_id, rank, node, run_dir) VALUES (?, ?, ?, ?)",
            [(launch_id, rank, node, run_dir) for rank, node, run_dir in procs],
        )

    def launch(self, launch_id: str) -> LaunchRow | None:
        row = self.conn.execute("SELECT * FROM launches WHERE id = ?", (launch_id,)).fetchone()
        return None if row is None else _launch(row)

    def active_launches(self) -> list[LaunchRow]:
        rows = self.conn.execute(
            "SELECT * FROM launches WHERE state IN ('starting', 'running', 'stopping') ORDER BY created_at, id"
        ).fetchall()
        return [_launch(r) for r in rows]

    def launches_of(self, job_id: str) -> list[LaunchRow]:
        rows = self.conn.execute(
            "SELECT * FROM launches WHERE job_id = ? ORDER BY created_at, id", (job_id,)
        ).fetchall()
        return [_launch(r) for r in rows]

    def update_launch(self, launch_id: str, **fields: Any) -> None:
        names = ", ".join(f"{name} = ?" for name in fields)
        self.conn.execute(f"UPDATE launches SET {names} WHERE id = ?", (*fields.values(), launch_id))

    def set_proc(self, launch_id: str, rank: int, pid: int, proc_start: str | None) -> None:
        self.conn.execute(
            "UPDATE procs SET pid = ?, proc_start = ? WHERE launch_id = ? AND rank = ?",
            (pid, proc_start, launch_id, rank),
        )

    def procs(self, launch_ids: Iterable[str] | None = None) -> dict[str, list[ProcRow]]:
        if launch_ids is None:
            rows = self.conn.execute("SELECT * FROM procs").fetchall()
        else:
            ids = list(launch_ids)
            rows = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows += self.conn.execute(f"SELECT * FROM procs WHERE launch_id IN ({marks})", chunk).fetchall()
        result: dict[str, list[ProcRow]] = {}
        for r in rows:
            result.setdefault(r["launch_id"], []).append(
                ProcRow(r["launch_id"], r["rank"], r["node"], r["pid"], r["proc_start"], r["run_dir"])
            )
        for items in result.values():
            items.sort(key=lambda p: p.rank)
        return result

    # --- events -------------------------------------------------------------------------------------
    def event(self, time: float, kind: str, job_id: str | None, message: str) -> None:
        self.conn.execute(
            "INSERT INTO events(time, kind, job_id, message) VALUES (?, ?, ?, ?)",
            (time, kind, job_id, message),
        )

    def events(self, limit: int = 50, job_id: str | None = None) -> list[dict[str, Any]]:
        if job_id is None:
            rows = self.conn.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        else:
            rows = self.conn.execute(
                "SELECT * FROM events WHERE job_id = ? ORDER BY id DESC LIMIT ?", (job_id, limit)
            ).fetchall()
        return [dict(r) for r in reversed(rows)]

    # --- profiles and interference ------------------------------------------------------------------
    def put_profile(self, name: str, body: dict[str, Any], measured_at: float, source: str) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO profiles(name, body, measured_at, source) VALUES (?, ?, ?, ?)",
            (name, json.dumps(body), measured_at, source),
        )

    def profiles(self) -> dict[str, dict[str, Any]]:
        rows = self.conn.execute("SELECT name, body FROM profiles ORDER BY name").fetchall()
        return {r["name"]: json.loads(r["body"]) for r in rows}

    def put_ratio(self, victim: str, other: str, xi: float, measured_at: float) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO interference(victim, other, xi, measured_at) VALUES (?, ?, ?, ?)",
            (victim, other, xi, measured_at),
        )

    def ratios(self) -> dict[tuple[str, str], float]:
        rows = self.conn.execute("SELECT victim, other, xi FROM interference").fetchall()
        return {(r["victim"], r["other"]): float(r["xi"]) for r in rows}

    def profiles_version(self) -> tuple[float, ...]:
        """Changes whenever a profile or ratio is stored (to know when to rebuild the instance)."""
        a = self.conn.execute("SELECT COUNT(*), COALESCE(MAX(measured_at), 0) FROM profiles").fetchone()
        b = self.conn.execute("SELECT COUNT(*), COALESCE(MAX(measured_at), 0) FROM interference").fetchone()
        return (a[0], a[1], b[0], b[1])
