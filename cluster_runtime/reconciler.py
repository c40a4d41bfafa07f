"""The reconcile logic: make reality match the desired state, level-triggered and idempotent.

Desired state (in SQLite): the submitted jobs and the current plan (which job runs on which GPUs with
how many accumulation steps). Reality: the launches the node agents report. One pass:

1. **observe** — poll every active launch; record progress; a launch whose processes all ended is
   finalised in one transaction: completed (exit 0), stopped (we asked), or failed (requeued with a
   retry limit, ``failed`` after that);
2. **decide** — with a policy configured, on an arrival, completion, failure, cancel or round
   boundary, ask the policy for its actions through the same loop as the simulator and turn them into
   the next plan (checked like an operator's plan);
3. **converge** — stop launches the plan no longer wants (``SIGTERM``, ``SIGKILL`` after the grace
   period), start planned jobs that do not run, once their GPUs are free of stopping jobs and below
   capacity.

A pass only compares desired and observed state, so running it twice changes nothing, and a daemon
that crashed anywhere resumes by running it again after :meth:`Reconciler.recover`. A job never runs
twice: a launch row is committed before its process starts, a job with an active launch is never
started again, and recovery looks for the processes of launches whose pid was never recorded.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_runtime.backends import Backend
from cluster_runtime.config import RuntimeConfig
from cluster_runtime.inventory import Inventory
from cluster_runtime.plan import Assignment, validate_plan
from cluster_runtime.replay import ScheduleReplay
from cluster_runtime.spec import JobSpec, RawPlanEntry, job_spec_from_dict, render_command
from cluster_runtime.store import FINISHED_JOB_STATES, JobRow, LaunchRow, ProcRow, Store
from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference, InterferenceModel, TableInterference
from formulation.io import instance_from_dict, read_json, schedule_from_dict, schedule_to_dict
from formulation.speed import Profile
from heuristics.core import Policy, Start
from heuristics.loop import InvalidActionError, SchedulingLoop

log = logging.getLogger(__name__)


@dataclass
class PassStats:
    """What one reconcile pass did and how long it took."""

    seconds: float = 0.0
    started: int = 0
    stopped: int = 0
    ended: int = 0
    decided: bool = False
    mps_restarts: int = 0
    errors: list[str] = field(default_factory=list)


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    from formulation.io import _profile_to_dict

    return _profile_to_dict(profile)


def profile_from_dict(data: dict[str, Any]) -> Profile:
    from formulation.io import ProfileModel, _profile_from_model

    return _profile_from_model(ProfileModel.model_validate(data))


class Reconciler:
    """Desired state → reality, through a :class:`~cluster_runtime.backends.Backend`.

    Parameters
    ----------
    store
        The state database.
    backend
        Local or Ray.
    config
        Daemon settings (capacity, grace periods, retries, MPS thread shares, fault injection).
    policy
        A heuristics policy asked for the next plan on every event; ``None``: plans come only from
        ``apply``.
    clock
        Wall clock (seconds); the loop's time is ``clock() - epoch`` where ``epoch`` is fixed when the
        state is created, so times survive restarts.
    """

    def __init__(
        self,
        store: Store,
        backend: Backend,
        config: RuntimeConfig,
        policy: Policy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.backend = backend
        self.config = config
        self.inventory = backend.inventory
        self.cluster = self.inventory.cluster(config.capacity)
        self.base_policy = policy
        self.replay: ScheduleReplay | None = None
        self.clock = clock
        self.lock = threading.RLock()
        self._file_profiles: dict[str, Profile] = {}
        self._file_interference: InterferenceModel | None = None
        if config.profiles_file is not None:
            self._file_profiles, self._file_interference = load_profiles_file(config.profiles_file)
        self._instance_key: tuple[Any, ...] | None = None
        self._instance: Instance | None = None
        self._decide_needed = True
        self._spawned = 0
        self._last_mps_check = -math.inf
        self.reconciles = 0
        self.last_stats = PassStats()
        self.mps_restarts = 0
        with store.transaction() as tx:
            epoch = tx.meta("epoch")
            if epoch is None:
                epoch = repr(self.clock())
                tx.set_meta("epoch", epoch)
            stored_inventory = tx.meta("inventory")
            tx.set_meta("inventory", _inventory_key(self))
        self.epoch = float(epoch)
        with store.read() as tx:
            saved = tx.meta("replay_schedule")
        if saved is not None:
            self.replay = ScheduleReplay(schedule_from_dict(json.loads(saved), source="saved schedule"))
        if stored_inventory is not None and stored_inventory != _inventory_key(self):
            log.warning("the GPU inventory changed since the state was created; flat GPU ids may differ")

    @property
    def policy(self) -> Policy | None:
        """Who decides now: a schedule being replayed until all its jobs are finished, else the
        configured policy (``None``: plans come only from ``apply``)."""
        if self.replay is not None:
            with self.store.read() as tx:
                open_jobs = {j.id for j in tx.jobs(("pending", "running"))}
                submitted = tx.job_count()
            if open_jobs & set(self.replay.segments) or submitted < len(self.replay.segments):
                return self.replay
        return self.base_policy

    # --- profiles and the instance ------------------------------------------------------------------
    def known_profiles(self) -> dict[str, Profile]:
        """Profiles jobs may name: the profiles file, overridden by measured profiles."""
        with self.store.read() as tx:
            measured = tx.profiles()
        profiles = dict(self._file_profiles)
        for name, body in measured.items():
            profiles[name] = profile_from_dict(body)
        return profiles

    def interference(self) -> InterferenceModel:
        """The profiles file's model with measured ratios (``duetto profile``) on top."""
        with self.store.read() as tx:
            measured = tx.ratios()
        base = self._file_interference or ConstantInterference(self.config.default_xi)
        if not measured:
            return base
        pairs: dict[tuple[str, str], float | None] = {}
        default: float | None = self.config.default_xi
        if isinstance(base, TableInterference):
            pairs.update(base.pairs)
            default = base.default
        elif isinstance(base, ConstantInterference):
            default = base.xi
        pairs.update(measured)
        return TableInterference(pairs, default)

    def instance(self) -> Instance:
        """Cluster, profiles, interference and every submitted job (rebuilt only when they change)."""
        with self.store.read() as tx:
            key = (tx.job_count(), tx.profiles_version())
            if key == self._instance_key and self._instance is not None:
                return self._instance
            jobs = tx.jobs()
        profiles = {**self._job_profiles(), **self.known_profiles()}
        used = {self._profile_name(row) for row in jobs}
        instance = Instance(
            cluster=self.cluster,
            jobs=tuple(self._job(row) for row in jobs),
            profiles={name: p for name, p in profiles.items() if name in used},
            interference=self.interference(),
            name="runtime",
        )
        self._instance_key, self._instance = key, instance
        return instance

    def _job_profiles(self) -> dict[str, Profile]:
        """Inline profiles of submitted jobs, first definition of a name wins (kept in memory)."""
        if self._inline_profiles is None:
            self._inline_profiles = {}
            with self.store.read() as tx:
                for row in tx.jobs():
                    inline = row.spec.get("profile")
                    if isinstance(inline, dict):
                        self._inline_profiles.setdefault(inline["name"], profile_from_dict(inline))
        return self._inline_profiles

    _inline_profiles: dict[str, Profile] | None = None

    @staticmethod
    def _profile_name(row: JobRow) -> str:
        profile = row.spec["profile"]
        return str(profile["name"]) if isinstance(profile, dict) else str(profile)

    def _job(self, row: JobRow) -> Job:
        spec = row.spec
        return Job(
            row.id,
            row.arrival,
            spec["num_gpus"],
            float(spec["iterations"]),
            spec["batch_size"],
            self._profile_name(row),
        )

    def now(self) -> float:
        """Loop time: seconds since the state was created."""
        return self.clock() - self.epoch

    # --- requests from the API ----------------------------------------------------------------------
    def submit(self, data: Any, source: str = "job") -> dict[str, Any]:
        """Accept a job spec, or a list of them all or none; raises :class:`DuettoInputError` naming the problem.

        A list is checked whole (every spec, ids unique within it and new to the store) before any job
        is recorded, then recorded in one transaction: a bad spec anywhere submits nothing.
        One spec answers ``{"job_id", "arrival"}``, a list ``{"jobs": [{"job_id", "arrival"}, ...]}``.
        """
        if isinstance(data, list):
            if not data:
                raise DuettoInputError("an empty list of job specs", source=source)
            items = [(item, self._batch_source(source, index, item)) for index, item in enumerate(data)]
        else:
            items = [(data, source)]
        with self.lock:
            with self.store.read() as tx:
                measured = set(tx.profiles())
            profiles = {**self._job_profiles(), **self.known_profiles()}
            accepted: list[tuple[JobSpec, str]] = []
            first_source: dict[str, str] = {}
            batch_profiles: dict[str, Profile] = {}
            for item, item_source in items:
                spec = self._checked_spec(item, item_source, measured, profiles, batch_profiles)
                if spec.id in first_source:
                    raise DuettoInputError(
                        f"job '{spec.id}' appears twice in the list (also {first_source[spec.id]})",
                        source=item_source,
                        field="id",
                    )
                first_source[spec.id] = item_source
                accepted.append((spec, item_source))
            now = self.clock()
            with self.store.transaction() as tx:
                for spec, item_source in accepted:
                    existing = tx.job(spec.id)
                    if existing is not None:
                        # Raising inside the transaction rolls back the jobs of the list inserted so far.
                        raise DuettoInputError(
                            f"job '{spec.id}' was already submitted (state {existing.state})",
                            source=item_source,
                            field="id",
                        )
                    retries = self.config.default_max_retries if spec.max_retries is None else spec.max_retries
                    tx.insert_job(spec.id, dict(spec.raw), now, now - self.epoch, retries)
                    tx.event(now, "submitted", spec.id, f"{spec.num_gpus} GPU(s), {spec.iterations} iterations")
            for spec, _ in accepted:
                if spec.inline_profile is not None:
                    self._job_profiles().setdefault(spec.profile_name, spec.inline_profile)
            self._decide_needed = True
        answers = [{"job_id": spec.id, "arrival": now - self.epoch} for spec, _ in accepted]
        return {"jobs": answers} if isinstance(data, list) else answers[0]

    @staticmethod
    def _batch_source(source: str, index: int, item: Any) -> str:
        """Where a spec of a list is: its id when it has one, else its position."""
        job_id = item.get("id") if isinstance(item, dict) else None
        return f"job '{job_id}'" if isinstance(job_id, str) and job_id else f"{source} {index + 1} of the list"

    def _checked_spec(
        self,
        data: Any,
        source: str,
        measured: set[str],
        profiles: Mapping[str, Profile],
        batch_profiles: dict[str, Profile],
    ) -> JobSpec:
        """Validate one spec against the known profiles and the cluster (nothing is recorded).

        ``batch_profiles`` holds the inline profiles of the specs of the same list checked before this
        one, so that two specs of one list cannot define one name two ways.
        """
        spec = job_spec_from_dict(data, source)
        if spec.workdir is not None and self.backend.name == "local" and not os.path.isdir(spec.workdir):
            # Checked where the jobs run (the Ray backend's nodes are other machines: checked at launch).
            raise DuettoInputError(f"{spec.workdir!r} is not a directory", source=source, field="workdir")
        if spec.inline_profile is not None and spec.profile_name not in measured:
            known = profiles.get(spec.profile_name, batch_profiles.get(spec.profile_name))
            if known is not None and known != spec.inline_profile:
                raise DuettoInputError(
                    f"inline profile '{spec.profile_name}' differs from the known profile of that name; "
                    "rename it or refer to the known one by name",
                    source=source,
                    field="profile",
                )
            profile = spec.inline_profile
            batch_profiles.setdefault(spec.profile_name, profile)
        elif spec.profile_name in profiles:
            # A measured profile (duetto profile) wins over the submitter's inline guess.
            profile = profiles[spec.profile_name]
        elif spec.profile_name in batch_profiles:
            profile = batch_profiles[spec.profile_name]
        else:
            raise DuettoInputError(
                f"unknown profile '{spec.profile_name}'; known: {', '.join(sorted(profiles)) or 'none'}",
                source=source,
                field="profile",
            )
        # Feasibility exactly as the problem defines it: gang fits the cluster, some sub-batch fits memory.
        try:
            Instance(
                self.cluster,
                (Job(spec.id, 0.0, spec.num_gpus, float(spec.iterations), spec.batch_size, spec.profile_name),),
                {spec.profile_name: profile},
            )
        except DuettoInputError as error:
            raise error.located(source) from None
        return spec

    def apply(self, entries: Sequence[RawPlanEntry], source: str = "operator") -> dict[str, Any]:
        """Replace the plan; rejected whole (:class:`~cluster_runtime.plan.PlanRejected`) if invalid."""
        with self.lock:
            instance = self.instance()
            with self.store.read() as tx:
                finished = {j.id: j.state for j in tx.jobs(FINISHED_JOB_STATES)}
            assignments = validate_plan(entries, self.inventory, instance, finished)
            plan_id = self._store_plan(assignments, source)
        return {"plan_id": plan_id, "entries": len(assignments)}

    def apply_schedule(self, data: Any, source: str = "schedule") -> dict[str, Any]:
        """Replay a computed schedule (oracle or simulated policy) in order; see :mod:`cluster_runtime.replay`."""
        schedule = schedule_from_dict(data, source=source)
        replay = ScheduleReplay(schedule)
        replay.check(self.inventory.num_gpus)
        with self.lock:
            now = self.clock()
            with self.store.transaction() as tx:
                submitted = {j.id for j in tx.jobs()}
                tx.set_meta("replay_schedule", json.dumps(schedule_to_dict(schedule)))
                tx.event(
                    now,
                    "schedule",
                    None,
                    f"replaying a schedule from {schedule.producer}: {len(replay.segments)} job(s)",
                )
            self.replay = replay
            self._decide_needed = True
        waiting = sorted(set(replay.segments) - submitted)
        return {"replay": replay.name, "jobs": len(replay.segments), "not_submitted": waiting}

    def _store_plan(self, assignments: Sequence[Assignment], source: str) -> int:
        now = self.clock()
        with self.store.transaction() as tx:
            plan_id = tx.insert_plan(now, source, [a.to_dict() for a in assignments])
            tx.replace_desired(((a.job_id, a.gpus, a.steps) for a in assignments), plan_id)
            tx.event(now, "plan", None, f"plan {plan_id} from {source}: {len(assignments)} job(s)")
        return plan_id

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel a job: it leaves the plan and its processes are stopped."""
        with self.lock:
            now = self.clock()
            with self.store.transaction() as tx:
                job = tx.job(job_id)
                if job is None:
                    raise DuettoInputError(f"unknown job '{job_id}'")
                if job.state in FINISHED_JOB_STATES:
                    raise DuettoInputError(f"job '{job_id}' is already {job.state}")
                tx.update_job(job_id, state="cancelled", finished_at=now)
                tx.drop_desired(job_id)
                tx.event(now, "cancelled", job_id, "cancelled by the operator")
            self._decide_needed = True
        return {"job_id": job_id, "state": "cancelled"}

    # --- crash recovery -----------------------------------------------------------------------------
    def recover(self) -> dict[str, int]:
        """Re-adopt the processes a previous daemon left, requeue launches that never started, and roll
        back launches that started only partly.

        A launch the daemon was starting when it died (state ``starting``) is the runtime's own
        business, never the job's: if every process of it was started it is adopted; if none was, it
        is requeued; if only some were (a gang across nodes whose rank 0 started and rank 1 did not),
        the started ones are stopped and the launch ends ``rolled-back``. None of these charges an
        attempt. Returns counts: ``adopted``, ``not_started`` and ``rolled_back`` launches.
        """
        adopted = not_started = rolled_back = 0
        with self.lock:
            with self.store.read() as tx:
                active = tx.active_launches()
                rows = tx.procs([launch.id for launch in active])
            now = self.clock()
            for launch in active:
                procs = rows.get(launch.id, [])
                found_ranks: set[int] = set()
                for proc in procs:
                    if proc.pid is None:
                        hit = self.backend.find(proc.node, launch.id, proc.run_dir)
                        if hit is not None:
                            found_ranks.add(proc.rank)
                            with self.store.transaction() as tx:
                                tx.set_proc(launch.id, proc.rank, int(hit["pid"]), hit["proc_start"])
                    else:
                        self.backend.adopt(proc.node, launch.id, proc.pid, proc.proc_start, proc.run_dir)
                        found_ranks.add(proc.rank)
                found = bool(found_ranks)
                partial = launch.state == "starting" and found and len(found_ranks) < len(procs)
                with self.store.transaction() as tx:
                    if launch.state == "starting" and not found:
                        tx.update_launch(launch.id, state="ended", ended_at=now, outcome="not-started")
                        job = tx.job(launch.job_id)
                        if job is not None and job.state == "running":
                            tx.update_job(launch.job_id, state="pending")
                        tx.event(now, "recovered", launch.job_id, f"launch {launch.id} never started; requeued")
                        not_started += 1
                    elif partial:
                        # Finished by the normal stop path: once the started ranks have ended, the launch
                        # ends 'rolled-back' and the job is pending again, with no attempt charged.
                        tx.update_launch(
                            launch.id,
                            state="stopping",
                            started_at=launch.created_at,
                            stop_requested_at=now,
                            pending_outcome="rolled-back",
                        )
                        tx.event(
                            now,
                            "recovered",
                            launch.job_id,
                            f"launch {launch.id} was half-started ({len(found_ranks)} of {len(procs)} processes) "
                            "when the daemon stopped; rolling it back (no attempt charged)",
                        )
                        rolled_back += 1
                    else:
                        if launch.state == "starting":
                            tx.update_launch(launch.id, state="running", started_at=launch.created_at)
                        tx.event(now, "recovered", launch.job_id, f"re-adopted launch {launch.id}")
                        adopted += 1
                if launch.state == "starting" and not found:
                    self.backend.release(launch.id)
                if partial:
                    for proc in procs:
                        if proc.rank in found_ranks:
                            self._stop_proc(proc.node, launch.id, force=False)
            with self.store.transaction() as tx:
                # A job marked running without an active launch cannot happen (one transaction sets
                # both), but a hand-edited database should not leave a job stuck.
                active_jobs = {launch.job_id for launch in tx.active_launches()}
                for job in tx.jobs(("running",)):
                    if job.id not in active_jobs:
                        tx.update_job(job.id, state="pending")
            self._decide_needed = True
        return {"adopted": adopted, "not_started": not_started, "rolled_back": rolled_back}

    # --- one pass -------------------------------------------------------------------------------------
    def reconcile(self) -> PassStats:
        """One observe → decide → converge pass."""
        start = time.perf_counter()
        stats = PassStats()
        with self.lock:
            now = self.clock()
            try:
                self._check_mps(now, stats)
            except Exception as error:  # a node's trouble must not stop the pass for the others
                log.exception("checking the nodes failed")
                stats.errors.append(f"node check: {error}")
            self._record_backend_events(now)
            stats.ended = self._observe(now)
            if self.policy is not None:
                stats.decided = self._decide(now)
            self._converge(self.clock(), stats)
        stats.seconds = time.perf_counter() - start
        self.reconciles += 1
        self.last_stats = stats
        return stats

    def _record_backend_events(self, now: float) -> None:
        messages = self.backend.drain_events()
        if messages:
            with self.store.transaction() as tx:
                for message in messages:
                    tx.event(now, "agent", None, message)

    def _check_mps(self, now: float, stats: PassStats) -> None:
        if now - self._last_mps_check < self.config.mps.check_interval_s:
            return
        self._last_mps_check = now
        for node, status in enumerate(self.backend.ensure_mps()):
            if status.get("restarted"):
                stats.mps_restarts += 1
                self.mps_restarts += 1
                with self.store.transaction() as tx:
                    tx.event(now, "mps", None, f"node {node}: MPS control daemon was dead; restarted")

    # observe ------------------------------------------------------------------------------------------
    def _observe(self, now: float) -> int:
        with self.store.read() as tx:
            active = [launch for launch in tx.active_launches() if launch.state != "starting"]
            rows = tx.procs([launch.id for launch in active])
        if not active:
            return 0
        by_node: dict[int, list[str]] = defaultdict(list)
        for launch in active:
            for proc in rows.get(launch.id, []):
                by_node[proc.node].append(launch.id)
        statuses = self.backend.poll(by_node)
        progress: list[tuple[str, float]] = []
        ended: list[tuple[LaunchRow, list[dict[str, Any]]]] = []
        for launch in active:
            procs = rows.get(launch.id, [])
            states = []
            for proc in procs:
                status = statuses.get(f"{launch.id}@{proc.node}", {"known": False})
                if not status.get("known"):
                    try:
                        status = self._readopt(launch, proc)
                    except Exception as error:  # its node does not answer: no news, keep the launch as it is
                        log.error("re-adopting %s on node %s failed: %s", launch.id, proc.node, error)
                        status = {"known": True, "alive": True, "exit": None, "unreachable": True}
                states.append(status)
            if states and states[0].get("progress") is not None:
                progress.append((launch.job_id, float(states[0]["progress"])))
            if all(not s.get("alive") for s in states):
                ended.append((launch, states))
            elif launch.state != "stopping" and any(
                not s.get("alive") and (s.get("exit") or {}).get("returncode") != 0 for s in states
            ):
                # One process of a gang died: the gang cannot go on; stop the rest, then requeue.
                self._request_stop(launch, procs, now, pending_outcome="failed")
        if progress:
            with self.store.transaction() as tx:
                tx.set_progress(progress)
        for launch, states in ended:
            self._finalize(launch, rows.get(launch.id, []), states, now)
        return len(ended)

    def _readopt(self, launch: LaunchRow, proc: ProcRow) -> dict[str, Any]:
        if proc.pid is None:
            hit = self.backend.find(proc.node, launch.id, proc.run_dir)
            return {"known": True, "alive": False, "exit": None} if hit is None else dict(hit["status"])
        return self.backend.adopt(proc.node, launch.id, proc.pid, proc.proc_start, proc.run_dir)

    def _finalize(self, launch: LaunchRow, procs: list[ProcRow], states: list[dict[str, Any]], now: float) -> None:
        codes = [(s.get("exit") or {}).get("returncode") for s in states]
        success = bool(codes) and all(code == 0 for code in codes)
        stopped_by_us = launch.stop_requested_at is not None and launch.pending_outcome is None
        rolled_back = launch.pending_outcome == "rolled-back"
        first_bad = next((c for c in codes if c != 0), 0)
        with self.store.transaction() as tx:
            job = tx.job(launch.job_id)
            assert job is not None
            service = (now - (launch.started_at or now)) * len(launch.gpus)
            fields: dict[str, Any] = {"attained_service": job.attained_service + max(0.0, service)}
            if success:
                outcome = "completed"
                fields.update(state="completed", finished_at=now, progress=float(job.spec["iterations"]))
                tx.drop_desired(job.id)
                message = f"completed (launch {launch.id})"
            elif rolled_back:
                # The runtime's fault (a launch it could not finish starting): never a job failure.
                outcome = "rolled-back"
                if job.state != "cancelled":
                    fields["state"] = "pending"
                message = f"half-started launch {launch.id} rolled back; no attempt charged"
            elif stopped_by_us:
                outcome = "stopped"
                if job.state != "cancelled":
                    fields["state"] = "pending"
                message = f"stopped (launch {launch.id}, exit {first_bad}); progress kept"
            else:
                outcome = "failed" if all(c is not None for c in codes) else "lost"
                reason = f"exit code {first_bad}" if outcome == "failed" else "process vanished without an exit status"
                attempts = job.attempts + 1
                fields.update(attempts=attempts, last_error=reason)
                if job.state == "cancelled":
                    message = f"ended after cancel: {reason}"
                elif attempts > job.max_retries:
                    fields.update(state="failed", finished_at=now)
                    tx.drop_desired(job.id)
                    message = f"failed for good after {attempts} attempt(s): {reason}"
                else:
                    fields.update(state="pending", not_before=now + self.config.retry_backoff_s)
                    if self.policy is not None:
                        tx.drop_desired(job.id)  # back to the queue; the policy places it again
                    message = f"crashed ({reason}); requeued, retry {attempts} of {job.max_retries}"
            tx.update_job(job.id, **fields)
            tx.update_launch(
                launch.id,
                state="ended",
                ended_at=now,
                exit_code=None if first_bad is None else int(first_bad),
                outcome=outcome,
            )
            tx.event(now, outcome, job.id, message)
        self._decide_needed = True
        self.backend.release(launch.id)
        by_node: dict[int, list[str]] = defaultdict(list)
        for proc in procs:
            by_node[proc.node].append(launch.id)
        try:
            self.backend.forget(by_node)
        except Exception as error:  # bookkeeping only
            log.warning("forgetting %s failed: %s", launch.id, error)

    # decide -------------------------------------------------------------------------------------------
    def _loop_now(self, policy: Policy, now: float) -> tuple[SchedulingLoop, dict[str, tuple[tuple[int, ...], int]]]:
        """The scheduling loop in the runtime's current state: every arrived unfinished job submitted
        at its arrival, the planned jobs started at their launch times, measured progress and attained
        service restored. Returns the loop and the current plan."""
        instance = self.instance()
        loop = SchedulingLoop(instance, _KeepPolicyState(policy))
        state = loop.state
        t = now - self.epoch
        with self.store.read() as tx:
            jobs = tx.jobs(("pending", "running"))
            desired = tx.desired()
            launches = {launch.job_id: launch for launch in tx.active_launches()}
        for row in sorted(jobs, key=lambda r: (r.arrival, r.seq)):
            if row.id not in desired and row.not_before > now:
                continue  # waiting out its retry back-off: it re-arrives when that ends
            state.submit(row.id, min(row.arrival, t))
            state.progress[row.id] = row.progress
            state.attained[row.id] = row.attained_service
            if row.first_start is not None:
                state.first_start[row.id] = row.first_start - self.epoch
        rows = {row.id: row for row in jobs}

        def started_at(job_id: str) -> float:
            launch = launches.get(job_id)
            if launch is not None and launch.started_at is not None:
                return min(launch.started_at - self.epoch, t)
            return t

        for job_id in sorted(desired, key=started_at):
            gpus, steps = desired[job_id]
            state.apply([Start(job_id, gpus, steps)], started_at(job_id), "plan")
        for job_id in desired:
            state.set_progress(job_id, rows[job_id].progress, t)
        state.now = t
        return loop, desired

    def _decide(self, now: float) -> bool:
        """Ask the policy through the scheduling loop when something happened; store its plan."""
        policy = self.policy
        assert policy is not None
        due = self._decide_needed or (self._next_wake is not None and now >= self._next_wake)
        if not due:
            with self.store.read() as tx:
                due = any(self._last_decision_at < j.not_before <= now for j in tx.jobs(("pending",)))
        if not due:
            return False
        self._decide_needed = False
        self._last_decision_at = now
        try:
            loop, current = self._loop_now(policy, now)
            loop.step(now - self.epoch)
        except (InvalidActionError, DuettoInputError) as error:
            message = f"policy {policy.name}: {error}; the current plan stays"
            log.error(message)
            with self.store.transaction() as tx:
                tx.event(now, "policy-error", None, message)
            return True
        requested = loop.requested
        round_length = getattr(policy, "round_length", None)
        if requested is not None and math.isfinite(requested):
            self._next_wake = self.epoch + max(requested, now - self.epoch)
        elif round_length:
            self._next_wake = now + round_length
        else:
            self._next_wake = None
        planned = {job_id: (run.gpus, run.steps) for job_id, run in loop.state.running.items()}
        if planned == current:
            return True
        # Keep the plan's order stable: jobs already planned first, new ones in the loop's order.
        order = [j for j in current if j in planned] + [j for j in planned if j not in current]
        self._store_plan([Assignment(j, *planned[j]) for j in order], f"policy:{policy.name}")
        return True

    _last_decision_at: float = -math.inf
    _next_wake: float | None = None

    # converge -----------------------------------------------------------------------------------------
    def _request_stop(
        self, launch: LaunchRow, procs: list[ProcRow], now: float, pending_outcome: str | None = None
    ) -> None:
        with self.store.transaction() as tx:
            tx.update_launch(launch.id, state="stopping", stop_requested_at=now, pending_outcome=pending_outcome)
        for proc in procs:
            self._stop_proc(proc.node, launch.id, force=False)

    def _stop_proc(self, node: int, launch_id: str, force: bool) -> None:
        try:
            self.backend.stop(node, launch_id, force=force)
        except Exception as error:  # the node does not answer: the next pass (or the force stop) retries
            log.error("stopping %s on node %s failed: %s", launch_id, node, error)

    def _converge(self, now: float, stats: PassStats) -> None:
        with self.store.read() as tx:
            desired = tx.desired()
            active = tx.active_launches()
            rows = tx.procs([launch.id for launch in active])
            jobs = {row.id: row for row in tx.jobs(("pending", "running"))}
        capacity = self.cluster.capacity
        occupancy: dict[int, int] = defaultdict(int)
        stopping_gpus: set[int] = set()
        has_launch: set[str] = set()
        for launch in active:
            has_launch.add(launch.job_id)
            want = desired.get(launch.job_id)
            procs = rows.get(launch.id, [])
            if launch.state in ("starting", "running") and (want is None or want != (launch.gpus, launch.steps)):
                self._request_stop(launch, procs, now)
                stats.stopped += 1
                stopping_gpus.update(launch.gpus)
            elif launch.state == "stopping":
                stopping_gpus.update(launch.gpus)
                waited = now - (launch.stop_requested_at or now)
                if waited >= self.config.stop_grace_s and not launch.force_sent:
                    for proc in procs:
                        self._stop_proc(proc.node, launch.id, force=True)
                    with self.store.transaction() as tx:
                        tx.update_launch(launch.id, force_sent=1)
            for gpu in launch.gpus:
                occupancy[gpu] += 1
        starts: list[tuple[JobRow, tuple[int, ...], int]] = []
        for job_id, (gpus, steps) in desired.items():
            job = jobs.get(job_id)
            if job is None or job.state != "pending" or job_id in has_launch or job.not_before > now:
                continue
            if any(gpu in stopping_gpus or occupancy[gpu] >= capacity for gpu in gpus):
                continue  # wait for the GPUs to be free of jobs that are on their way out
            for gpu in gpus:
                occupancy[gpu] += 1
            starts.append((job, gpus, steps))
        if starts:
            stats.started = self._start(starts, desired, now)

    def _thread_percentage(
        self, gpus: tuple[int, ...], desired: Mapping[str, tuple[tuple[int, ...], int]]
    ) -> int | None:
        sharing = 1
        for gpu in gpus:
            sharing = max(sharing, sum(1 for g, _ in desired.values() if gpu in g))
        if sharing <= 1:
            return None
        fixed = self.config.mps.shared_active_thread_percentage
        return fixed if fixed is not None else max(1, 100 // sharing)

    def _start(
        self,
        starts: list[tuple[JobRow, tuple[int, ...], int]],
        desired: Mapping[str, tuple[tuple[int, ...], int]],
        now: float,
    ) -> int:
        per_node = self.inventory.gpus_per_node
        prepared = []
        # 1. Write every launch (state 'starting') before any process exists.
        with self.store.transaction() as tx:
            for job, gpus, steps in starts:
                launch_id = f"{job.id}.{uuid.uuid4().hex[:10]}"
                nodes = sorted({gpu // per_node for gpu in gpus})
                base = self.config.runs_dir / job.id / launch_id
                ranks = [(rank, node, str(base / f"rank{rank}")) for rank, node in enumerate(nodes)]
                attempt = len(tx.launches_of(job.id)) + 1
                pct = self._thread_percentage(gpus, desired)
                tx.insert_launch(launch_id, job.id, attempt, gpus, steps, now, job.progress, pct, ranks)
                tx.update_job(job.id, state="running", first_start=job.first_start or now)
                prepared.append((job, gpus, steps, launch_id, ranks, attempt, pct))
        # 2. Hold the GPU shares in the resource manager (Ray placement groups; nothing locally).
        share = 1.0 / self.cluster.capacity
        wanted = [
            (launch_id, {node: sum(1 for g in gpus if g // per_node == node) for _, node, _ in ranks})
            for _job, gpus, _steps, launch_id, ranks, _attempt, _pct in prepared
        ]
        try:
            placed = self.backend.reserve_many(wanted, share)
        except Exception as error:
            log.error("reserving GPU shares failed: %s", error)
            placed = set()
        ready = []
        for item in prepared:
            if item[3] in placed:
                ready.append(item)
            else:
                self._abandon(item[3], item[0].id, now, "unplaced", "the resource manager could not hold its GPUs yet")
        # 3. Start every process of every launch in one batch (each node's zygote forks in parallel).
        items: list[tuple[str, int, int, str, dict[str, Any]]] = []
        for job, gpus, steps, launch_id, ranks, attempt, pct in ready:
            master_port = self.backend.free_port(ranks[0][1]) if len(ranks) > 1 else 0
            for rank, node, run_dir in ranks:
                request = self._request(
                    job, gpus, steps, launch_id, attempt, rank, node, ranks, run_dir, master_port, pct
                )
                items.append((launch_id, rank, node, run_dir, request))
        limit = self.config.debug_crash_after_launches
        crash = limit is not None and self._spawned + len(items) >= limit
        if crash:
            assert limit is not None
            items = items[: max(0, limit - self._spawned)]  # fault injection: die in the middle of the plan
        try:
            answers = self.backend.launch_many([(node, request) for _, _, node, _, request in items])
        except Exception as error:
            log.error("launching a batch failed (%s); looking for what did start", error)
            answers = []
            for launch_id, _rank, node, run_dir, _request in items:
                try:
                    hit = self.backend.find(node, launch_id, run_dir)
                except Exception:
                    hit = None
                answers.append({"pid": hit["pid"], "proc_start": hit["proc_start"]} if hit else {"error": str(error)})
        self._spawned += len(items)
        if crash:
            os.kill(os.getpid(), signal.SIGKILL)  # before recording any pid: the worst moment
        # 4. Record the pids; a launch with a process that could not start is stopped and requeued.
        pids: dict[str, list[tuple[int, int, str | None]]] = defaultdict(list)
        failed: dict[str, str] = {}
        job_fault: set[str] = set()
        for (launch_id, rank, _node, _run_dir, _request), answer in zip(items, answers, strict=True):
            if "error" in answer:
                failed[launch_id] = str(answer["error"])
                if answer.get("job_fault"):
                    job_fault.add(launch_id)
            else:
                pids[launch_id].append((rank, int(answer["pid"]), answer.get("proc_start")))
        started = 0
        with self.store.transaction() as tx:
            for job, _gpus, _steps, launch_id, _ranks, _attempt, _pct in ready:
                for rank, pid, proc_start in pids.get(launch_id, []):
                    tx.set_proc(launch_id, rank, pid, proc_start)
                if launch_id not in failed:
                    tx.update_launch(launch_id, state="running", started_at=now)
                    tx.event(now, "started", job.id, f"launch {launch_id}")
                    started += 1
        for job, _gpus, _steps, launch_id, ranks, _attempt, _pct in ready:
            if launch_id in failed:
                log.error("launch of %s failed: %s", job.id, failed[launch_id])
                for rank, _pid, _start in pids.get(launch_id, []):
                    self._stop_proc(ranks[rank][1], launch_id, force=True)
                # A process the node could not start (fork failed, the zygote died, an earlier copy
                # would not die) is the runtime's fault: retried after the back-off, no attempt charged.
                # A program that cannot be executed is not this: its wrapper records exit 127.
                if launch_id in job_fault:  # the spec's fault (its workdir is missing there): an attempt
                    self._abandon(launch_id, job.id, now, "failed", failed[launch_id], charge=True)
                else:
                    self._abandon(launch_id, job.id, now, "launch-error", failed[launch_id], backoff=True)
        return started

    def _abandon(
        self,
        launch_id: str,
        job_id: str,
        now: float,
        outcome: str,
        reason: str,
        backoff: bool = False,
        charge: bool = False,
    ) -> None:
        """End a launch that could not start; the job is pending again, charged an attempt only when
        ``charge`` (its spec's fault, not the runtime's)."""
        with self.store.transaction() as tx:
            job = tx.job(job_id)
            assert job is not None
            tx.update_launch(launch_id, state="ended", ended_at=now, outcome=outcome)
            fields: dict[str, Any] = {"state": "pending", "last_error": reason}
            if job.state == "cancelled":
                fields = {"last_error": reason}
            elif charge:
                fields["attempts"] = job.attempts + 1
                if job.attempts + 1 > job.max_retries:
                    fields.update(state="failed", finished_at=now)
                    tx.drop_desired(job_id)
                else:
                    fields["not_before"] = now + self.config.retry_backoff_s
            elif backoff:
                fields["not_before"] = now + self.config.retry_backoff_s
            tx.update_job(job_id, **fields)
            tx.event(now, outcome, job_id, reason)
        self.backend.release(launch_id)

    def _request(
        self,
        job: JobRow,
        gpus: tuple[int, ...],
        steps: int,
        launch_id: str,
        attempt: int,
        rank: int,
        node: int,
        ranks: list[tuple[int, int, str]],
        run_dir: str,
        master_port: int,
        pct: int | None,
    ) -> dict[str, Any]:
        return build_launch_request(
            self.inventory,
            job.id,
            job.spec,
            job.progress,
            gpus,
            steps,
            launch_id,
            attempt,
            rank,
            node,
            ranks,
            run_dir,
            master_port,
            pct,
        )

    # --- shutdown ------------------------------------------------------------------------------------
    def stop_everything(self, grace_s: float) -> int:
        """Stop every running launch (jobs go back to pending with their progress); returns how many."""
        with self.lock:
            with self.store.read() as tx:
                active = tx.active_launches()
                rows = tx.procs([launch.id for launch in active])
            now = self.clock()
            for launch in active:
                if launch.state != "stopping":
                    self._request_stop(launch, rows.get(launch.id, []), now)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                self._observe(self.clock())
                with self.store.read() as tx:
                    if not tx.active_launches():
                        break
                time.sleep(0.05)
            with self.store.read() as tx:
                left = tx.active_launches()
            for launch in left:
                for proc in rows.get(launch.id, []):
                    self._stop_proc(proc.node, launch.id, force=True)
            end = time.monotonic() + 5.0
            while left and time.monotonic() < end:
                self._observe(self.clock())
                with self.store.read() as tx:
                    left = tx.active_launches()
                time.sleep(0.05)
            return len(active)

    # --- read-only views -----------------------------------------------------------------------------
    def status(self, events: int = 20) -> dict[str, Any]:
        """Everything ``duetto status`` shows."""
        with self.store.read() as tx:
            jobs = tx.jobs()
            launches = {launch.job_id: launch for launch in tx.active_launches()}
            rows = tx.procs([launch.id for launch in launches.values()])
            desired = tx.desired()
            plan = tx.latest_plan()
            recent = tx.events(events)
        occupants: dict[int, list[str]] = defaultdict(list)
        job_list = []
        counts: dict[str, int] = defaultdict(int)
        for row in jobs:
            counts[row.state] += 1
            launch = launches.get(row.id)
            if launch is not None:
                for gpu in launch.gpus:
                    occupants[gpu].append(row.id)
            job_list.append(
                {
                    "id": row.id,
                    "state": row.state,
                    "progress": row.progress,
                    "iterations": row.spec["iterations"],
                    "num_gpus": row.spec["num_gpus"],
                    "attempts": row.attempts,
                    "max_retries": row.max_retries,
                    "arrival": row.arrival,
                    "first_start": None if row.first_start is None else row.first_start - self.epoch,
                    "finished": None if row.finished_at is None else row.finished_at - self.epoch,
                    "planned_gpus": list(desired[row.id][0]) if row.id in desired else None,
                    "planned_steps": desired[row.id][1] if row.id in desired else None,
                    "launch": None
                    if launch is None
                    else {
                        "id": launch.id,
                        "state": launch.state,
                        "gpus": list(launch.gpus),
                        "steps": launch.steps,
                        "thread_percentage": launch.thread_percentage,
                        "pids": [p.pid for p in rows.get(launch.id, [])],
                    },
                    "last_error": row.last_error,
                }
            )
        nodes = []
        try:
            mps = self.backend.mps_status()
        except Exception as error:  # a node that does not answer must not break status
            mps = [{"error": str(error)}] * len(self.inventory.nodes)
        restarts = list(getattr(self.backend, "agent_restarts", []))
        for node in self.inventory.nodes:
            nodes.append(
                {
                    "index": node.index,
                    "name": node.name,
                    "address": node.address,
                    "ray_node_id": node.ray_node_id,
                    "mps": mps[node.index] if node.index < len(mps) else None,
                    "agent_restarts": restarts[node.index] if node.index < len(restarts) else 0,
                    "gpus": [
                        {
                            "id": node.index * self.inventory.gpus_per_node + gpu.index,
                            "uuid": gpu.uuid,
                            "memory_gib": gpu.memory_gib,
                            "jobs": occupants.get(node.index * self.inventory.gpus_per_node + gpu.index, []),
                        }
                        for gpu in node.gpus
                    ],
                }
            )
        return {
            "time": self.now(),
            "backend": self.backend.name,
            "policy": None if self.policy is None else self.policy.name,
            "capacity": self.cluster.capacity,
            "fake_gpus": self.inventory.fake,
            "counts": dict(counts),
            "jobs": job_list,
            "nodes": nodes,
            "plan": plan,
            "reconciles": self.reconciles,
            "last_reconcile_seconds": self.last_stats.seconds,
            "mps_restarts": self.mps_restarts,
            "events": recent,
        }

    def job_detail(self, job_id: str) -> dict[str, Any]:
        with self.store.read() as tx:
            job = tx.job(job_id)
            if job is None:
                raise DuettoInputError(f"unknown job '{job_id}'")
            launches = tx.launches_of(job_id)
            rows = tx.procs([launch.id for launch in launches])
            events = tx.events(200, job_id)
        return {
            "id": job.id,
            "state": job.state,
            "spec": job.spec,
            "progress": job.progress,
            "attempts": job.attempts,
            "last_error": job.last_error,
            "launches": [
                {
                    "id": launch.id,
                    "state": launch.state,
                    "outcome": launch.outcome,
                    "exit_code": launch.exit_code,
                    "gpus": list(launch.gpus),
                    "steps": launch.steps,
                    "thread_percentage": launch.thread_percentage,
                    "procs": [
                        {"rank": p.rank, "node": p.node, "pid": p.pid, "run_dir": p.run_dir}
                        for p in rows.get(launch.id, [])
                    ],
                }
                for launch in launches
            ],
            "events": events,
        }

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536, rank: int = 0) -> str:
        """The last bytes of the job's latest launch's stdout or stderr."""
        with self.store.read() as tx:
            if tx.job(job_id) is None:
                raise DuettoInputError(f"unknown job '{job_id}'")
            launches = tx.launches_of(job_id)
            rows = tx.procs([launch.id for launch in launches[-1:]])
        if not launches:
            return ""
        procs = rows.get(launches[-1].id, [])
        if rank >= len(procs):
            raise DuettoInputError(f"job '{job_id}' has no rank {rank}")
        proc = procs[rank]
        return self.backend.read_log(proc.node, proc.run_dir, stream, tail_bytes)


class _KeepPolicyState:
    """The daemon's policy as the loop sees it: the loop is rebuilt for every decision (jobs arrive
    that the instance did not know), but the policy object lives as long as the daemon, so the loop
    must not ``reset`` it."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    def __getattr__(self, name: str) -> Any:
        if name == "reset":
            raise AttributeError(name)
        return getattr(self._policy, name)

    def decide(self, view: Any) -> Any:
        return self._policy.decide(view)


def build_launch_request(
    inventory: Inventory,
    job_id: str,
    spec: Mapping[str, Any],
    progress: float,
    gpus: tuple[int, ...],
    steps: int,
    launch_id: str,
    attempt: int,
    rank: int,
    node: int,
    ranks: Sequence[tuple[int, int, str]],
    run_dir: str,
    master_port: int = 0,
    thread_percentage: int | None = None,
) -> dict[str, Any]:
    """What a node agent needs to start one process of a launch: argv (templated), the job contract's
    environment variables, the GPU UUIDs of this node and the MPS thread share.

    The contract (docs/runtime.md): ``DUETTO_JOB_ID``, ``DUETTO_LAUNCH_ID``, ``DUETTO_ATTEMPT``,
    ``DUETTO_BATCH_SIZE`` (B), ``DUETTO_SUB_BATCH`` (B/s), ``DUETTO_STEPS`` and
    ``DUETTO_ACCUMULATION_STEPS`` (s), ``DUETTO_ITERATIONS``, ``DUETTO_START_ITERATION``,
    ``DUETTO_NUM_GPUS``, ``DUETTO_GPUS``/``DUETTO_GPU_IDS`` (flat ids of the whole gang), ``DUETTO_NODE``,
    ``DUETTO_NODE_RANK``, ``DUETTO_NUM_NODES``, ``DUETTO_MASTER_ADDR``, ``DUETTO_MASTER_PORT``,
    ``DUETTO_PROGRESS_FILE``, ``DUETTO_RUN_DIR``; the agent adds ``CUDA_VISIBLE_DEVICES`` and the MPS
    variables.
    """
    per_node = inventory.gpus_per_node
    batch = int(spec["batch_size"])
    local = [g for g in gpus if g // per_node == node]
    values: dict[str, Any] = {
        "job_id": job_id,
        "launch_id": launch_id,
        "attempt": attempt,
        "batch_size": batch,
        "sub_batch": batch // steps,
        "steps": steps,
        "iterations": int(spec["iterations"]),
        "start_iteration": math.floor(progress),
        "num_gpus": len(gpus),
        "gpus": ",".join(str(g) for g in gpus),
        "node_rank": rank,
        "num_nodes": len(ranks),
        "master_addr": inventory.nodes[ranks[0][1]].address,
        "master_port": master_port,
        "progress_file": str(Path(run_dir) / "progress"),
        "run_dir": run_dir,
    }
    env = dict(spec.get("env") or {})
    env.update({f"DUETTO_{key.upper()}": str(value) for key, value in values.items()})
    env["DUETTO_ACCUMULATION_STEPS"] = str(steps)
    env["DUETTO_GPU_IDS"] = values["gpus"]
    env["DUETTO_NODE"] = str(node)
    return {
        "launch_id": launch_id,
        "run_dir": run_dir,
        "argv": render_command(spec["command"], values),
        "env": env,
        "workdir": spec.get("workdir"),
        "gpu_uuids": [inventory.gpu(g).uuid for g in local],
        "thread_percentage": thread_percentage,
    }


def load_profiles_file(path: Path) -> tuple[dict[str, Profile], InterferenceModel | None]:
    """Profiles (and interference model) of an instance-format file; its jobs and cluster are ignored."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise DuettoInputError("expected a JSON object with 'profiles'", source=str(path))
    stub = dict(data)
    stub["cluster"] = {"nodes": 1, "gpus_per_node": 1}
    stub["jobs"] = []
    instance = instance_from_dict(stub, source=str(path))
    return dict(instance.profiles), instance.interference


def _inventory_key(reconciler: Reconciler) -> str:
    return ",".join(gpu.uuid for node in reconciler.inventory.nodes for gpu in node.gpus)
