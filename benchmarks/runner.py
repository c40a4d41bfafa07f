"""Parallel, resumable execution of a study's independent tasks.

Every study (``duetto gap``, ``duetto scale``, ...) is a list of independent *tasks* (one instance
solved by one method, one policy simulated at one size, ...). :func:`run_tasks` runs them

* in a local process pool (default; ``workers=1`` runs them in this process, one after the other), or
* on a Ray cluster (``ray_address="auto"``, ``"ray://host:10001"``, ``"local"`` to start one here),

with a rich progress bar, and appends each finished task's rows to a JSON-lines file as soon as it
returns (:class:`RowStore`). A rerun with the same output skips the tasks whose key is already in the
file, so an interrupted sweep resumes where it stopped; a task that raised is not stored and is run
again next time.

A task function must be importable (a module-level function) and take one JSON-like ``dict``; it returns
a list of row dicts. Workers never write files: only this process appends to the store, so there are no
write races.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from formulation.errors import DuettoInputError
from formulation.extras import duetto_extra_missing, has_extra, require_extra
from formulation.io import write_text_atomic

Row = dict[str, Any]
TaskFunction = Callable[[Mapping[str, Any]], list[Row]]

#: Object-store cap for a Ray instance started here (NOTES-dependencies: the default takes ~7 GiB).
RAY_OBJECT_STORE_BYTES = 200 * 1024 * 1024


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    return value


class RowStore:
    """Append-only JSON-lines file of finished tasks: one line ``{"key": ..., "rows": [...]}`` per task.

    A line cut short by a crash is ignored on reading (its task runs again).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._entries: dict[str, list[Row]] = {}
        # a folder that cannot be written is the user's path, found before any task runs, not after
        folder = str(self.path.parent)
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise DuettoInputError("is a file; the results go to a folder", source=folder)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DuettoInputError(f"cannot write here: {error.strerror or error}", source=folder) from None
        if not os.access(self.path.parent, os.W_OK):
            raise DuettoInputError("cannot write here: permission denied", source=folder)
        if self.path.exists():
            with self.path.open(encoding="utf-8") as handle:
                for line in handle:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        entry = json.loads(line)
                        self._entries[str(entry["key"])] = list(entry["rows"])
                    except (json.JSONDecodeError, KeyError, TypeError):
                        continue  # a partial last line from an interrupted run

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        return list(self._entries)

    def add(self, key: str, rows: Sequence[Row]) -> None:
        """Append a finished task's rows (flushed to disk at once)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        clean = [_jsonable(dict(row)) for row in rows]
        line = json.dumps({"key": key, "rows": clean}, allow_nan=False)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._entries[key] = clean

    def discard(self, keys: Iterable[str]) -> int:
        """Forget the given tasks (they run again next time); rewrites the file atomically. Returns how
        many were dropped."""
        drop = {k for k in keys if k in self._entries}
        if not drop:
            return 0
        for key in drop:
            del self._entries[key]
        lines = (json.dumps({"key": key, "rows": rows}, allow_nan=False) + "\n" for key, rows in self._entries.items())
        write_text_atomic(self.path, "".join(lines))
        return len(drop)

    def rows(self, keys: Iterable[str] | None = None) -> list[Row]:
        """Rows of the given task keys (default: all), in key order given (or file order)."""
        selected = self._entries.keys() if keys is None else [k for k in keys if k in self._entries]
        return [row for key in selected for row in self._entries[key]]

    def frame(self, keys: Iterable[str] | None = None) -> pd.DataFrame:
        return pd.DataFrame(self.rows(keys))


@dataclass
class RunSummary:
    """What :func:`run_tasks` did."""

    total: int
    skipped: int  # already in the store
    ran: int
    failed: dict[str, str] = field(default_factory=dict)  # key → error message
    wall_seconds: float = 0.0
    backend: str = "local"


def _call(function: TaskFunction, task: Mapping[str, Any]) -> list[Row]:
    return [dict(row) for row in function(task)]


def _describe_error(error: BaseException) -> str:
    last = traceback.format_exception_only(type(error), error)[-1].strip()
    return last[:500]


@contextmanager
def _progress(description: str, total: int, enabled: bool) -> Iterator[Callable[[int], None]]:
    from duetto.cli_support import progress_bar

    with progress_bar(description, total, enabled=enabled) as advance:
        yield advance


def run_tasks(
    function: TaskFunction,
    tasks: Sequence[Mapping[str, Any]],
    *,
    key: Callable[[Mapping[str, Any]], str],
    store: RowStore,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    description: str = "tasks",
    ray_num_cpus: float = 1.0,
) -> RunSummary:
    """Run the tasks not yet in ``store`` and append their rows to it.

    Parameters
    ----------
    function
        Module-level function ``task -> rows``.
    tasks
        JSON-like dicts (picklable).
    key
        Unique, stable key of a task (what makes a rerun skip it).
    store
        Where finished tasks' rows go.
    workers
        Local processes (default: the CPU count); ``1`` runs in this process. Ignored with Ray.
    ray_address
        Run on Ray: an address for ``ray.init`` (``"auto"``, ``"ray://..."``, ``"host:port"``) or
        ``"local"`` to start a small local Ray instance (``num_cpus`` = ``workers`` or the CPU count).
    progress
        Show a rich progress bar on stderr.
    description
        Label of the progress bar.
    ray_num_cpus
        CPUs each Ray task reserves (set it to the solver's thread count to avoid oversubscription).

    Returns
    -------
    RunSummary
        Counts, failures (key → message; failed tasks are not stored and run again on a rerun).
    """
    keys = [key(task) for task in tasks]
    if len(set(keys)) != len(keys):
        raise DuettoInputError("two tasks of the study have the same key", field="tasks")
    todo = [(k, t) for k, t in zip(keys, tasks, strict=True) if k not in store]
    summary = RunSummary(total=len(tasks), skipped=len(tasks) - len(todo), ran=0)
    started = time.perf_counter()
    if not todo:
        return summary
    if ray_address is not None:
        require_extra("ray", "running a study on Ray (--ray-address)")
    count = workers if workers is not None else (os.cpu_count() or 1)
    if count < 1:
        raise DuettoInputError(f"must be >= 1, got {count}", field="workers")
    with _progress(description, len(todo), progress) as advance:

        def finished(task_key: str, rows: list[Row] | None, error: BaseException | None) -> None:
            if error is not None:
                summary.failed[task_key] = _describe_error(error)
            else:
                store.add(task_key, rows or [])
                summary.ran += 1
            advance(1)

        if ray_address is not None:
            summary.backend = "ray"
            _run_ray(function, todo, finished, ray_address, count if workers is not None else None, ray_num_cpus)
        elif count == 1:
            summary.backend = "inline"
            for task_key, task in todo:
                try:
                    rows = _call(function, task)
                except Exception as error:  # one failed task must not stop the sweep
                    finished(task_key, None, error)
                else:
                    finished(task_key, rows, None)
        else:
            summary.backend = "local"
            _run_pool(function, todo, finished, count)
    summary.wall_seconds = time.perf_counter() - started
    return summary


MANAGER_JOIN_SECONDS = 10.0
"""How long a stopped sweep waits for the process pool's manager thread to wind down."""


def _pool_worker_setup(interval: float = 0.5) -> None:
    """Pool worker initializer. Ctrl-C is for the process that runs the sweep, which ends the workers
    (:func:`_shut_down_now`); a worker that took it would report it as the task's error and go on with
    the next task. A worker exits when that process is gone (killed, crashed) instead of living on
    idle or finishing a task nobody will record; its solver worker follows (``solvers.worker``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:  # re-parented (to init or a subreaper) once the parent is gone
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="exit-when-parent-is-gone", daemon=True).start()


def _run_pool(
    function: TaskFunction,
    todo: list[tuple[str, Mapping[str, Any]]],
    finished: Callable[[str, list[Row] | None, BaseException | None], None],
    workers: int,
) -> None:
    # spawn: workers start clean (no copy of this process's threads, progress bar, solver state)
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=context, initializer=_pool_worker_setup)
    try:
        pending: dict[Future[list[Row]], str] = {pool.submit(_call, function, task): k for k, task in todo}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task_key = pending.pop(future)
                error = future.exception()
                finished(task_key, None if error is not None else future.result(), error)
    except BaseException:
        # Ctrl-C (or a failure here): the executor's own shutdown would wait for the running tasks
        # and start queued ones (each worker takes the interrupt as one task's error and goes on), so
        # the sweep would not stop. Drop what has not started and end the workers; what finished is in
        # the store, and the same command resumes from it.
        _shut_down_now(pool)
        raise
    pool.shutdown(wait=True)


def _shut_down_now(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the pool's worker processes now (their solver workers
    follow, see ``solvers.worker``). The processes are only reachable through the executor's
    ``_processes`` before Python 3.14 (``terminate_workers``), and ``shutdown`` forgets them, so they
    are taken first."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()
    # Wait (briefly) for the executor's manager thread to close its wake-up pipe. Left running, it can
    # close the pipe while the interpreter's exit hook for process pools writes to it (CPython 3.11
    # takes no lock there), and the user sees "OSError: Bad file descriptor" after "interrupted".
    if isinstance(manager, threading.Thread) and manager.is_alive():
        manager.join(timeout=MANAGER_JOIN_SECONDS)


def _run_ray(
    function: TaskFunction,
    todo: list[tuple[str, Mapping[str, Any]]],
    finished: Callable[[str, list[Row] | None, BaseException | None], None],
    address: str,
    local_cpus: int | None,
    num_cpus: float,
) -> None:
    import ray

    started_here = False
    if not ray.is_initialized():
        if address == "local":
            ray.init(
                num_cpus=local_cpus or os.cpu_count() or 1,
                include_dashboard=False,
                object_store_memory=RAY_OBJECT_STORE_BYTES,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}},
            )
        else:
            ray.init(address=address, log_to_driver=False)
        started_here = True
    try:
        remote = ray.remote(num_cpus=num_cpus, max_retries=0)(_call)
        refs = {remote.remote(function, task): k for k, task in todo}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    task_key = refs.pop(ref)
                    try:
                        rows = ray.get(ref)
                    except Exception as error:
                        finished(task_key, None, error)
                    else:
                        finished(task_key, rows, None)
        except BaseException:
            # Ctrl-C: on a cluster this process did not start, its tasks would otherwise run on
            for ref in refs:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
    finally:
        if started_here:
            ray.shutdown()


def write_table(frame: pd.DataFrame, path_stem: str | Path) -> list[Path]:
    """Write ``frame`` as ``<stem>.csv`` and, with the ``parquet`` extra installed, ``<stem>.parquet``;
    returns the paths written. Without pyarrow the CSV is the whole result and one line on stderr says
    how to get the Parquet copy (a study must not fail at its end for an optional format)."""
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv_path = stem.with_suffix(".csv")
    parquet_path = stem.with_suffix(".parquet")
    frame.to_csv(csv_path, index=False)
    if not has_extra("parquet"):
        print(
            f"note: {parquet_path.name} not written: {duetto_extra_missing('parquet', 'Parquet output')}",
            file=sys.stderr,
        )
        return [csv_path]
    frame.to_parquet(parquet_path, index=False)
    return [csv_path, parquet_path]
