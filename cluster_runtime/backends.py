"""Backends: how the one reconcile logic reaches the node agents.

- :class:`LocalBackend`: the agents live in the daemon's process and start subprocesses on this
  machine (one agent per node of the inventory; a fake inventory of several nodes is several agents
  on this machine, each with its own MPS control daemon).
- :class:`~cluster_runtime.ray_backend.RayBackend`: one agent per Ray node, a detached Ray actor pinned
  to its node; each launch also holds ``1/C`` of each of its GPUs as a Ray placement group, so Ray's
  accounting shows a GPU shared by ``C`` jobs as full.

Both expose the same methods; the reconciler never knows which one it drives.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from cluster_runtime.agent import NodeAgent
from cluster_runtime.config import RuntimeConfig
from cluster_runtime.inventory import Inventory
from cluster_runtime.mps import MpsError
from formulation.errors import DuettoInputError

log = logging.getLogger(__name__)


class Backend(Protocol):
    """What the reconciler and the profiler need from the nodes."""

    name: str
    inventory: Inventory

    def start(self) -> None:
        """Bring every node up (MPS control daemons)."""
        ...

    def launch(self, node: int, request: dict[str, Any]) -> dict[str, Any]:
        """Start one process of a launch on ``node``; returns ``{"pid", "proc_start"}``."""
        ...

    def launch_many(self, items: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Start processes ``(node, request)`` (nodes in parallel); ``{"pid", "proc_start"}`` or
        ``{"error"}`` per item, in order. Raises if a node could not say what it started."""
        ...

    def poll(self, by_node: Mapping[int, list[str]]) -> dict[str, dict[str, Any]]:
        """Status of launches per node (keys: ``f"{launch_id}"`` per node query, see implementations)."""
        ...

    def stop(self, node: int, launch_id: str, force: bool = False) -> bool: ...

    def adopt(self, node: int, launch_id: str, pid: int, proc_start: str | None, run_dir: str) -> dict[str, Any]: ...

    def find(self, node: int, launch_id: str, run_dir: str) -> dict[str, Any] | None: ...

    def forget(self, by_node: Mapping[int, list[str]]) -> None: ...

    def ensure_mps(self) -> list[dict[str, Any]]: ...

    def mps_status(self) -> list[dict[str, Any]]: ...

    def read_log(self, node: int, run_dir: str, stream: str, tail_bytes: int) -> str: ...

    def progress_history(self, node: int, run_dir: str) -> list[tuple[float, float]]: ...

    def free_port(self, node: int) -> int: ...

    def reserve(self, launch_id: str, gpus_by_node: Mapping[int, int], share: float) -> bool:
        """Hold the launch's GPU share in the resource manager (Ray); ``False``: not possible now."""
        ...

    def reserve_many(self, items: Sequence[tuple[str, Mapping[int, int]]], share: float) -> set[str]:
        """:meth:`reserve` for many launches at once; returns the launch ids that got their share."""
        ...

    def release(self, launch_id: str) -> None: ...

    def stop_all(self, grace_s: float) -> None: ...

    def drain_events(self) -> list[str]:
        """Node-level happenings since the last call (an agent lost and recreated), for the event log."""
        ...

    def sweep(self, runs_dir: str) -> list[int]:
        """Kill every job process of ``runs_dir`` still running on any node; returns the pids killed."""
        ...

    def shutdown(self, quit_mps: bool = True) -> None: ...


def agent_mps_settings(config: RuntimeConfig, node_key: int | str) -> dict[str, Any]:
    """The MPS settings a node agent gets (directories per node)."""
    if isinstance(node_key, int):
        pipe, logs = config.mps_dirs(node_key)
    else:
        base = config.state_dir / "mps" / node_key
        pipe, logs = base / "pipe", base / "log"
    return {
        "mode": config.mps.mode,
        "binary": config.mps.binary,
        "pipe_dir": str(pipe),
        "log_dir": str(logs),
        "default_active_thread_percentage": config.mps.default_active_thread_percentage,
    }


class LocalBackend:
    """Agents in this process, one per inventory node, all starting processes on this machine."""

    name = "local"

    def __init__(self, config: RuntimeConfig, inventory: Inventory) -> None:
        self.config = config
        self.inventory = inventory
        self.agents = [
            NodeAgent(
                node.index,
                agent_mps_settings(config, node.index),
                gpus=[{"uuid": g.uuid, "memory_gib": g.memory_gib, "name": g.name} for g in node.gpus],
                env_passthrough=list(config.job_env_passthrough),
            )
            for node in inventory.nodes
        ]

    def start(self) -> None:
        for agent in self.agents:
            try:
                agent.start_mps()
            except MpsError as error:
                raise DuettoInputError(f"node {agent.node}: {error} (use --mps off to run without MPS)") from None

    def launch(self, node: int, request: dict[str, Any]) -> dict[str, Any]:
        return self.agents[node].launch(request)

    def launch_many(self, items: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
        by_node: dict[int, list[int]] = {}
        for index, (node, _) in enumerate(items):
            by_node.setdefault(node, []).append(index)
        answers: list[dict[str, Any]] = [{}] * len(items)

        def one(node: int) -> None:
            indexes = by_node[node]
            for index, answer in zip(
                indexes, self.agents[node].launch_many([items[i][1] for i in indexes]), strict=True
            ):
                answers[index] = answer

        if len(by_node) == 1:
            one(next(iter(by_node)))
        elif by_node:
            # One thread per node: each node's zygote forks while the others do (pipe I/O frees the GIL).
            with ThreadPoolExecutor(max_workers=min(16, len(by_node))) as pool:
                for future in [pool.submit(one, node) for node in by_node]:
                    future.result()
        return answers

    def poll(self, by_node: Mapping[int, list[str]]) -> dict[str, dict[str, Any]]:
        result: dict[str, dict[str, Any]] = {}
        for node, ids in by_node.items():
            for launch_id, status in self.agents[node].poll(ids).items():
                result[f"{launch_id}@{node}"] = status
        return result

    def stop(self, node: int, launch_id: str, force: bool = False) -> bool:
        return self.agents[node].stop(launch_id, force)

    def adopt(self, node: int, launch_id: str, pid: int, proc_start: str | None, run_dir: str) -> dict[str, Any]:
        return self.agents[node].adopt(launch_id, pid, proc_start, run_dir)

    def find(self, node: int, launch_id: str, run_dir: str) -> dict[str, Any] | None:
        return self.agents[node].find(launch_id, run_dir)

    def forget(self, by_node: Mapping[int, list[str]]) -> None:
        for node, ids in by_node.items():
            self.agents[node].forget(ids)

    def ensure_mps(self) -> list[dict[str, Any]]:
        return [agent.ensure_mps() for agent in self.agents]

    def mps_status(self) -> list[dict[str, Any]]:
        return [agent.mps_status() for agent in self.agents]

    def read_log(self, node: int, run_dir: str, stream: str, tail_bytes: int) -> str:
        return self.agents[node].read_log(run_dir, stream, tail_bytes)

    def progress_history(self, node: int, run_dir: str) -> list[tuple[float, float]]:
        return self.agents[node].progress_history(run_dir)

    def free_port(self, node: int) -> int:
        return self.agents[node].free_port()

    def reserve(self, launch_id: str, gpus_by_node: Mapping[int, int], share: float) -> bool:
        return True  # this machine has no other resource manager to tell

    def reserve_many(self, items: Sequence[tuple[str, Mapping[int, int]]], share: float) -> set[str]:
        return {launch_id for launch_id, _ in items}

    def release(self, launch_id: str) -> None:
        return None

    def stop_all(self, grace_s: float) -> None:
        for agent in self.agents:
            agent.stop_all(grace_s)

    def drain_events(self) -> list[str]:
        return []  # the agents live in this process: they cannot die on their own

    def sweep(self, runs_dir: str) -> list[int]:
        # Every agent of this backend runs on this machine: one pass over /proc finds them all.
        return self.agents[0].sweep(runs_dir) if self.agents else []

    def shutdown(self, quit_mps: bool = True) -> None:
        for agent in self.agents:
            if quit_mps:
                try:
                    agent.quit_mps()
                except Exception as error:  # keep shutting the other nodes down
                    log.warning("node %s: MPS quit failed: %s", agent.node, error)
            agent.close()


def make_backend(config: RuntimeConfig) -> Backend:
    """The backend ``config.backend`` names (Ray is imported only for ``"ray"``)."""
    if config.backend == "ray":
        from cluster_runtime.ray_backend import RayBackend

        return RayBackend(config)
    from cluster_runtime.inventory import resolve_inventory

    inventory = resolve_inventory(config.fake_gpus, config.inventory_file, config.gpu_memory_gib)
    return LocalBackend(config, inventory)
