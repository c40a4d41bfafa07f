"""The Ray backend: one node agent per Ray node with GPUs, as a detached actor pinned to that node.

- Nodes: every alive Ray node with a ``GPU`` resource, in (address, node id) order.
- Agents: ``NodeAgent`` as a Ray actor (``num_cpus=0``, ``NodeAffinitySchedulingStrategy(soft=False)``),
  named ``duetto-agent-<node id>`` and detached, so a daemon that restarts after a crash finds the
  same agents, which still track the processes they started.
- GPUs as Ray resources: a launch holds a placement group with one bundle ``{"GPU": 1/C}`` per GPU it
  uses on each node (bundles pinned to the node by its ``ray.io/node-id`` label), so a GPU shared by
  ``C`` duetto jobs is fully used in Ray's accounting and other Ray work does not land on it. Ray
  chooses logical GPU ids for the bundles; the GPUs a job sees are the ones in the plan
  (``CUDA_VISIBLE_DEVICES`` by UUID), the placement group is accounting only.

Multi-node scheduling, node membership and transport are Ray's job; this module only maps the
backend methods onto actor calls.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cluster_runtime.agent import NodeAgent
from cluster_runtime.backends import agent_mps_settings
from cluster_runtime.config import RuntimeConfig
from cluster_runtime.inventory import GpuInfo, Inventory, NodeInfo, renumber
from formulation.errors import DuettoInputError
from formulation.extras import require_extra

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 60.0
#: How long a poll or heartbeat waits for an agent before it counts as unreachable.
HEARTBEAT_TIMEOUT_S = 10.0
#: How long a recreated agent may take to come up (actor start and MPS check).
AGENT_START_TIMEOUT_S = 30.0
#: Seconds between tries to recreate the agent of a node that does not come back.
AGENT_RETRY_S = 5.0


def _node_answer(answer: Any, node: int) -> dict[str, Any]:
    if isinstance(answer, Exception):
        return {"enabled": True, "alive": False, "error": f"node {node} agent unreachable: {answer.__class__.__name__}"}
    return dict(answer)


NO_CLUSTER_HELP = (
    "start one first: 'ray start --head --num-gpus=N' on this machine (and 'ray start --address=HEAD:6379 "
    "--num-gpus=N' on every other GPU node), then run the daemon with --ray-address auto or HEAD:6379"
)


def connect_to_ray(address: str | None, namespace: str) -> None:
    """Join the Ray cluster at ``address`` (``None``/``"auto"``: ``$RAY_ADDRESS`` or the cluster started
    on this machine), or raise a one-line :class:`DuettoInputError` that says how to start one.

    An explicit ``HOST:PORT`` is probed first: ``ray.init`` would retry a dead address for minutes.
    """
    require_extra("ray", "the Ray backend (--backend ray)")
    import ray

    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    host, _, port = target.rpartition(":")
    if target != "auto" and "://" not in target and port.isdigit():
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=3.0).close()
        except OSError as error:
            raise DuettoInputError(
                f"no Ray cluster answers at {target} ({error.__class__.__name__}); {NO_CLUSTER_HELP}",
                field="ray_address",
            ) from None
    try:
        ray.init(address=target, namespace=namespace, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, ValueError, RuntimeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else error.__class__.__name__
        raise DuettoInputError(f"cannot join a Ray cluster at '{target}': {first}; {NO_CLUSTER_HELP}") from None


class _RayAgent(NodeAgent):
    """The node agent as seen from Ray: fake GPU UUIDs name the Ray node (stable across restarts)."""

    def describe(self) -> dict[str, Any]:
        import ray

        if self._gpus is None and self._fake_gpu_count:
            from cluster_runtime.inventory import discover_local_gpus

            if not discover_local_gpus():
                node_id = ray.get_runtime_context().get_node_id()
                self._gpus = [
                    {
                        "uuid": f"GPU-fake-{node_id[:12]}-{i}",
                        "memory_gib": self._fake_memory_gib,
                        "name": "fake",
                    }
                    for i in range(self._fake_gpu_count)
                ]
        return super().describe()


class RayBackend:
    """Agents as Ray actors, launches holding fractional GPU placement groups."""

    name = "ray"

    def __init__(self, config: RuntimeConfig) -> None:
        require_extra("ray", "the Ray backend (--backend ray)")
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.config = config
        self._ray = ray
        if not ray.is_initialized():
            connect_to_ray(config.ray_address, config.ray_namespace)
        nodes = sorted(
            (n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("GPU", 0) > 0),
            key=lambda n: (n.get("NodeManagerAddress", ""), n["NodeID"]),
        )
        if not nodes:
            raise DuettoInputError("the Ray cluster has no alive node with a GPU resource")
        self._actor_class = ray.remote(num_cpus=0, max_restarts=0)(_RayAgent)
        self._affinity = NodeAffinitySchedulingStrategy
        self._nodes = nodes
        self.agents: list[Any] = [self._make_agent(index) for index in range(len(nodes))]
        described = []
        facts = ray.get([agent.describe.remote() for agent in self.agents], timeout=CALL_TIMEOUT_S)
        for index, (node, fact) in enumerate(zip(nodes, facts, strict=True)):
            if not fact["gpus"]:
                raise DuettoInputError(
                    f"Ray node {node['NodeID'][:12]} has a GPU resource but NVML finds no GPU there; "
                    "use --ray-fake-gpus on machines without GPUs (tests)"
                )
            gpus = tuple(
                GpuInfo(g["uuid"], index, i, float(g["memory_gib"]), str(g.get("name", "gpu")))
                for i, g in enumerate(fact["gpus"])
            )
            described.append(NodeInfo(index, fact["hostname"], fact["address"], gpus, node["NodeID"]))
        self.inventory: Inventory = renumber(described, fake=any(f["fake"] for f in facts))
        self._groups: dict[str, list[Any]] = {}
        self.agent_restarts = [0] * len(nodes)
        self._retry_at = [0.0] * len(nodes)
        self._events: list[str] = []
        self._recovery = threading.Lock()

    # --- agents, and what happens when one dies ---------------------------------------------------------
    def _make_agent(self, index: int) -> Any:
        """Node ``index``'s agent: the live detached actor of that name, or a new one pinned to the node."""
        node = self._nodes[index]
        node_id = node["NodeID"]
        return self._actor_class.options(
            name=f"duetto-agent-{node_id}",
            namespace=self.config.ray_namespace,
            lifetime="detached",
            get_if_exists=True,
            scheduling_strategy=self._affinity(node_id, soft=False),
        ).remote(
            index,
            agent_mps_settings(self.config, node_id[:16]),
            None,
            int(node["Resources"]["GPU"]) if self.config.ray_fake_gpus else None,
            self.config.gpu_memory_gib,
            env_passthrough=list(self.config.job_env_passthrough),
        )

    def _agent_failure(self, error: BaseException) -> bool:
        """The agent itself is gone or hung (not an error raised by the method it ran)."""
        from ray.exceptions import GetTimeoutError, RayActorError

        return isinstance(error, RayActorError | GetTimeoutError)

    def _recover_agent(self, node: int, error: BaseException, failed: Any) -> bool:
        """Replace node ``node``'s dead (or hung) agent by a new one and bring it up; ``True`` once it
        answers. The new agent knows no launch: the reconciler re-adopts them (pid + start time), and
        the node's MPS control daemon, which outlived the agent, is reused. Retried at most every
        ``AGENT_RETRY_S`` while it fails (a node that is gone), so other nodes keep their pace."""
        with self._recovery:
            if self.agents[node] is not failed:
                return True  # another thread (a status request, the reconcile pass) replaced it already
            now = time.monotonic()
            if now < self._retry_at[node]:
                return False
            old = self.agents[node]
            try:  # a hung agent is ended so that its name is free; a dead one is already gone
                self._ray.kill(old, no_restart=True)
            except Exception as kill_error:
                log.debug("agent of node %s: %s", node, kill_error)
            try:
                agent = self._make_agent(node)
                self._ray.get(agent.start_mps.remote(), timeout=AGENT_START_TIMEOUT_S)
            except Exception as start_error:
                self._retry_at[node] = now + AGENT_RETRY_S
                message = (
                    f"node {node}: agent unreachable ({error.__class__.__name__}); recreating it failed "
                    f"({start_error.__class__.__name__}); next try in {AGENT_RETRY_S:g} s"
                )
                log.error(message)
                self._events.append(message)
                return False
            self.agents[node] = agent
            self.agent_restarts[node] += 1
            message = (
                f"node {node}: agent was unreachable ({error.__class__.__name__}); "
                "recreated, its launches are re-adopted"
            )
            log.warning(message)
            self._events.append(message)
            return True

    def drain_events(self) -> list[str]:
        """Agent losses and recreations since the last call (the reconciler records them as events)."""
        with self._recovery:
            events, self._events = self._events, []
        return events

    def _one(self, node: int, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        """``agent.method(*args)`` on one node; a dead agent is recreated and the call made once more."""
        agent = self.agents[node]
        try:
            return self._ray.get(getattr(agent, method).remote(*args), timeout=timeout)
        except Exception as error:
            if not self._agent_failure(error) or not self._recover_agent(node, error, agent):
                raise
        return self._ray.get(getattr(self.agents[node], method).remote(*args), timeout=timeout)

    def _each(
        self, calls: Mapping[int, tuple[str, tuple[Any, ...]]], timeout: float = HEARTBEAT_TIMEOUT_S
    ) -> dict[int, Any]:
        """The calls ``{node: (method, args)}`` in parallel; per node its answer or, for a node whose
        agent failed and could not be recreated, the exception (never raised: one dead agent must not
        stop the others). A recreated agent is asked again."""
        used = {node: self.agents[node] for node in calls}
        refs = {node: getattr(used[node], method).remote(*args) for node, (method, args) in calls.items()}
        deadline = time.monotonic() + timeout
        answers: dict[int, Any] = {}
        for node, ref in refs.items():
            try:
                answers[node] = self._ray.get(ref, timeout=max(0.1, deadline - time.monotonic()))
            except Exception as error:
                answers[node] = error
        for node, answer in list(answers.items()):
            if (
                isinstance(answer, Exception)
                and self._agent_failure(answer)
                and self._recover_agent(node, answer, used[node])
            ):
                method, args = calls[node]
                try:
                    answers[node] = self._ray.get(getattr(self.agents[node], method).remote(*args), timeout=timeout)
                except Exception as error:
                    answers[node] = error
        return answers

    def _get(self, refs: Any) -> Any:
        return self._ray.get(refs, timeout=CALL_TIMEOUT_S)

    def start(self) -> None:
        try:
            self._get([agent.start_mps.remote() for agent in self.agents])
        except Exception as error:  # an MpsError raised inside an actor arrives wrapped by Ray
            raise DuettoInputError(f"starting the Ray nodes failed: {error}") from None

    def launch(self, node: int, request: dict[str, Any]) -> dict[str, Any]:
        return dict(self._one(node, "launch", request))

    def launch_many(self, items: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
        by_node: dict[int, list[int]] = {}
        for index, (node, _) in enumerate(items):
            by_node.setdefault(node, []).append(index)
        replies = self._each(
            {n: ("launch_many", ([items[i][1] for i in by_node[n]],)) for n in by_node}, timeout=CALL_TIMEOUT_S
        )
        answers: list[dict[str, Any]] = [{}] * len(items)
        for node, reply in replies.items():
            if isinstance(reply, Exception):
                # What that node started is unknown here: the reconciler looks for it (wrapper.pid files).
                raise RuntimeError(f"node {node}: {reply.__class__.__name__}: {reply}")
            for index, answer in zip(by_node[node], reply, strict=True):
                answers[index] = dict(answer)
        return answers

    def poll(self, by_node: Mapping[int, list[str]]) -> dict[str, dict[str, Any]]:
        answers = self._each({node: ("poll", (ids,)) for node, ids in by_node.items() if ids})
        result: dict[str, dict[str, Any]] = {}
        for node, answer in answers.items():
            if isinstance(answer, Exception):
                # The node does not answer: its launches stay as they were (alive, no news) until it does.
                log.error("node %s does not answer a poll: %s", node, answer.__class__.__name__)
                for launch_id in by_node[node]:
                    result[f"{launch_id}@{node}"] = {"known": True, "alive": True, "exit": None, "unreachable": True}
                continue
            for launch_id, status in answer.items():
                result[f"{launch_id}@{node}"] = status
        return result

    def stop(self, node: int, launch_id: str, force: bool = False) -> bool:
        return bool(self._one(node, "stop", launch_id, force))

    def adopt(self, node: int, launch_id: str, pid: int, proc_start: str | None, run_dir: str) -> dict[str, Any]:
        return dict(self._one(node, "adopt", launch_id, pid, proc_start, run_dir))

    def find(self, node: int, launch_id: str, run_dir: str) -> dict[str, Any] | None:
        found = self._one(node, "find", launch_id, run_dir)
        return None if found is None else dict(found)

    def forget(self, by_node: Mapping[int, list[str]]) -> None:
        # Best effort: a recreated agent does not know these launches anyway.
        self._each({node: ("forget", (ids,)) for node, ids in by_node.items() if ids})

    def ensure_mps(self) -> list[dict[str, Any]]:
        """The heartbeat (every ``mps.check_interval_s``): each agent checks its MPS daemon; an agent
        that does not answer is recreated here."""
        answers = self._each({node: ("ensure_mps", ()) for node in range(len(self.agents))})
        return [_node_answer(answers[node], node) for node in range(len(self.agents))]

    def mps_status(self) -> list[dict[str, Any]]:
        answers = self._each({node: ("mps_status", ()) for node in range(len(self.agents))})
        return [_node_answer(answers[node], node) for node in range(len(self.agents))]

    def read_log(self, node: int, run_dir: str, stream: str, tail_bytes: int) -> str:
        return str(self._one(node, "read_log", run_dir, stream, tail_bytes))

    def progress_history(self, node: int, run_dir: str) -> list[tuple[float, float]]:
        return [(float(x[0]), float(x[1])) for x in self._one(node, "progress_history", run_dir)]

    def free_port(self, node: int) -> int:
        return int(self._one(node, "free_port"))

    # --- GPU shares as Ray resources -----------------------------------------------------------------
    def _group_name(self, launch_id: str, node: int) -> str:
        return f"duetto-{launch_id}-n{node}"

    def reserve(self, launch_id: str, gpus_by_node: Mapping[int, int], share: float) -> bool:
        return launch_id in self.reserve_many([(launch_id, gpus_by_node)], share)

    def reserve_many(self, items: Sequence[tuple[str, Mapping[int, int]]], share: float) -> set[str]:
        """Create every launch's placement groups, then wait for them together."""
        from ray.util import placement_group, remove_placement_group

        created: dict[str, list[Any]] = {}
        for launch_id, gpus_by_node in items:
            groups = []
            for node, count in sorted(gpus_by_node.items()):
                node_id = self.inventory.nodes[node].ray_node_id
                groups.append(
                    placement_group(
                        [{"GPU": share}] * count,
                        strategy="PACK",
                        name=self._group_name(launch_id, node),
                        lifetime="detached",
                        bundle_label_selector=[{"ray.io/node-id": str(node_id)}] * count,
                    )
                )
            created[launch_id] = groups
        refs = {group.ready(): launch_id for launch_id, groups in created.items() for group in groups}
        ready, _ = self._ray.wait(list(refs), num_returns=len(refs), timeout=self.config.ray_placement_timeout_s)
        ready_count: dict[str, int] = {}
        for ref in ready:
            ready_count[refs[ref]] = ready_count.get(refs[ref], 0) + 1
        placed = set()
        for launch_id, groups in created.items():
            if ready_count.get(launch_id, 0) == len(groups):
                self._groups[launch_id] = groups
                placed.add(launch_id)
            else:
                for group in groups:
                    remove_placement_group(group)
        return placed

    def release(self, launch_id: str) -> None:
        from ray.util import get_placement_group, remove_placement_group

        groups = self._groups.pop(launch_id, None)
        if groups is None:
            # A launch from before a daemon restart: find its groups by name.
            groups = []
            for node in range(len(self.inventory.nodes)):
                try:
                    groups.append(get_placement_group(self._group_name(launch_id, node)))
                except ValueError:
                    continue
        for group in groups:
            try:
                remove_placement_group(group)
            except Exception as error:  # already gone
                log.debug("placement group of %s: %s", launch_id, error)

    def stop_all(self, grace_s: float) -> None:
        self._get([agent.stop_all.remote(grace_s) for agent in self.agents])

    def sweep(self, runs_dir: str) -> list[int]:
        killed: list[int] = []
        for answer in self._get([agent.sweep.remote(runs_dir) for agent in self.agents]):
            killed += [int(pid) for pid in answer]
        return killed

    def shutdown(self, quit_mps: bool = True) -> None:
        """Quit MPS on every node and end the agents (they are detached: kill them explicitly)."""
        if quit_mps:
            try:
                self._get([agent.quit_mps.remote() for agent in self.agents])
            except Exception as error:
                log.warning("MPS quit on Ray nodes failed: %s", error)
            for agent in self.agents:
                try:
                    self._ray.kill(agent)
                except Exception as error:
                    log.debug("agent already gone: %s", error)
            for launch_id in list(self._groups):
                self.release(launch_id)

    def gpu_available(self) -> float:
        """Ray's free ``GPU`` resource across the cluster (for status and tests)."""
        return float(self._ray.available_resources().get("GPU", 0.0))
