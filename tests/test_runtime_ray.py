"""The Ray backend end to end on a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``):
agents as actors pinned to their nodes, GPU shares held as Ray placement groups, a gang across both
nodes, and a daemon SIGKILL that the restarted daemon recovers from through the detached agents."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "runtime_fixtures"))

import harness

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

SMALL_STORE = 80 * 2**20


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One two-node cluster (2 logical GPUs each) for the whole module: Ray takes ~10 s to start."""
    old_path = os.environ.get("PATH", "")
    # Agents (Ray workers) inherit this environment: the stand-in MPS control program must be on PATH.
    os.environ["PATH"] = harness.runtime_env()["PATH"]
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "num_gpus": 2,
            "object_store_memory": SMALL_STORE,
            "include_dashboard": False,
        },
    )
    cluster.add_node(num_cpus=1, num_gpus=2, object_store_memory=SMALL_STORE)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="duetto-test-observer", log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        os.environ["PATH"] = old_path


def _gpu_free() -> float:
    return float(ray.available_resources().get("GPU", 0.0))


def _wait(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.05)


def _finished(status: dict[str, Any]) -> bool:
    return all(job["state"] in ("completed", "failed", "cancelled") for job in status["jobs"])


def test_two_node_ray_cluster_end_to_end(ray_cluster: Cluster, tmp_path: Path) -> None:
    state, ledger, locks = tmp_path / "s", tmp_path / "ledger", tmp_path / "locks"
    locks.mkdir()
    daemon = harness.DaemonProcess(state, "--backend", "ray", "--ray-address", ray_cluster.address, "--ray-fake-gpus")
    daemon.start()
    try:
        status = daemon.client.status()
        nodes = status["nodes"]
        assert status["backend"] == "ray" and len(nodes) == 2
        assert [len(n["gpus"]) for n in nodes] == [2, 2]
        assert len({n["ray_node_id"] for n in nodes}) == 2
        assert all(n["mps"]["alive"] for n in nodes)
        assert len({n["mps"]["pipe_dir"] for n in nodes}) == 2
        assert _gpu_free() == pytest.approx(4.0)

        for name, iterations, gpus in (("a", 150, 1), ("b", 150, 1), ("g", 40, 2)):
            daemon.client.submit(
                harness.job_spec(name, iterations=iterations, alpha=0.01, num_gpus=gpus, ledger=ledger, lock_dir=locks)
            )
        daemon.client.apply(
            {
                "entries": [
                    {"job_id": "a", "gpus": [[0, 0]]},
                    {"job_id": "b", "gpus": [[0, 0]], "steps": 2},
                    {
                        "job_id": "g",
                        "gpus": [[0, 1], [1, 0]],
                    },  # a gang across both nodes: one process per node
                ]
            }
        )
        # Each job holds 1/C = 0.5 of each of its GPUs in Ray's accounting: 0.5 + 0.5 + 2 x 0.5.
        _wait(lambda: _gpu_free() == pytest.approx(2.0), 30)
        status = daemon.client.wait_until(_finished, timeout=90)
        assert all(job["state"] == "completed" for job in status["jobs"])
        _wait(lambda: _gpu_free() == pytest.approx(4.0), 30)

        records = harness.read_ledger(ledger)
        assert harness.events(records, "double") == []
        starts = harness.events(records, "start")
        by_job = Counter(e["job"] for e in starts)
        assert by_job == Counter({"a": 1, "b": 1, "g": 2})
        gang = sorted(harness.events(records, "start", "g"), key=lambda e: e["node_rank"])
        assert [e["node_rank"] for e in gang] == ["0", "1"]
        assert gang[0]["cuda_visible_devices"] == nodes[0]["gpus"][1]["uuid"]
        assert gang[1]["cuda_visible_devices"] == nodes[1]["gpus"][0]["uuid"]
        assert gang[0]["mps_pipe"] != gang[1]["mps_pipe"]  # each node's own MPS daemon
        a_start = harness.events(records, "start", "a")[0]
        assert a_start["thread_percentage"] == "50" and a_start["cuda_visible_devices"] == nodes[0]["gpus"][0]["uuid"]
        assert len(harness.events(records, "done")) == 4  # a, b and both ranks of g
    finally:
        daemon.stop()
    assert daemon.wait_exit() == 0
    # Shutdown quit MPS on both nodes and ended the detached agents.
    logs = sorted(state.glob("mps/*/log/commands.log"))
    assert len(logs) == 2 and all(log.read_text().splitlines()[-1].endswith(" quit") for log in logs)
    _wait(
        lambda: (
            not [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("duetto-agent-")]
        ),
        30,
    )
    assert harness.cleanup(tmp_path) == []


@pytest.mark.slow  # ~12 s more of Ray; the local SIGKILL tests cover the recovery logic itself
def test_ray_daemon_killed_and_restarted_adopts_through_the_agents(ray_cluster: Cluster, tmp_path: Path) -> None:
    state, ledger, locks = tmp_path / "s", tmp_path / "ledger", tmp_path / "locks"
    locks.mkdir()
    daemon = harness.DaemonProcess(state, "--backend", "ray", "--ray-address", ray_cluster.address, "--ray-fake-gpus")
    daemon.start()
    try:
        daemon.client.submit(harness.job_spec("k", iterations=120, alpha=0.01, ledger=ledger, lock_dir=locks))
        daemon.client.apply([{"job_id": "k", "gpus": [[1, 1]]}])
        daemon.client.wait_until(lambda s: s["jobs"][0]["progress"] >= 5, 30)
        daemon.kill()
        daemon.start()
        status = daemon.client.wait_until(_finished, timeout=60)
        assert status["jobs"][0]["state"] == "completed"
        assert status["daemon"]["recovered"]["adopted"] == 1
        records = harness.read_ledger(ledger)
        assert len(harness.events(records, "start", "k")) == 1 and len(harness.events(records, "done", "k")) == 1
        _wait(lambda: _gpu_free() == pytest.approx(4.0), 30)
    finally:
        daemon.stop()
    assert harness.cleanup(tmp_path) == []


def test_a_dead_agent_is_recreated_and_the_other_nodes_keep_reconciling(ray_cluster: Cluster, tmp_path: Path) -> None:
    """SIGKILL of node 1's agent actor: node 0's job still completes on time, the agent is recreated,
    and node 1's job, which outlived its agent, is re-adopted (never started twice) and completes."""
    state, ledger, locks = tmp_path / "s", tmp_path / "ledger", tmp_path / "locks"
    locks.mkdir()
    daemon = harness.DaemonProcess(state, "--backend", "ray", "--ray-address", ray_cluster.address, "--ray-fake-gpus")
    daemon.start()
    try:
        daemon.client.submit(harness.job_spec("n0", iterations=150, alpha=0.01, ledger=ledger, lock_dir=locks))
        daemon.client.submit(harness.job_spec("n1", iterations=500, alpha=0.01, ledger=ledger, lock_dir=locks))
        daemon.client.apply([{"job_id": "n0", "gpus": [[0, 0]]}, {"job_id": "n1", "gpus": [[1, 0]]}])
        status = daemon.client.wait_until(lambda s: all(j["progress"] >= 2 for j in s["jobs"]), 60)
        node_id = status["nodes"][1]["ray_node_id"]
        agent = ray.get_actor(f"duetto-agent-{node_id}", namespace="duetto")
        pid = ray.get(agent.ping.remote(), timeout=30)
        os.kill(pid, signal.SIGKILL)
        # Node 0 keeps being reconciled: its job is seen to finish while node 1's agent is being replaced.
        daemon.client.wait_until(lambda s: next(j for j in s["jobs"] if j["id"] == "n0")["state"] == "completed", 60)
        status = daemon.client.wait_until(_finished, timeout=90)
        assert {j["id"]: (j["state"], j["attempts"]) for j in status["jobs"]} == {
            "n0": ("completed", 0),
            "n1": ("completed", 0),
        }
        assert [n["agent_restarts"] for n in status["nodes"]] == [0, 1]
        new_pid = ray.get(ray.get_actor(f"duetto-agent-{node_id}", namespace="duetto").ping.remote(), timeout=30)
        assert new_pid != pid
        records = harness.read_ledger(ledger)
        assert harness.events(records, "double") == []
        assert Counter(e["job"] for e in harness.events(records, "start")) == Counter({"n0": 1, "n1": 1})
        assert Counter(e["job"] for e in harness.events(records, "done")) == Counter({"n0": 1, "n1": 1})
        agent_events = [e for e in daemon.client.status()["events"] if e["kind"] == "agent"]
        assert any("recreated" in e["message"] for e in agent_events) or status["nodes"][1]["agent_restarts"] == 1
    finally:
        daemon.stop()
    assert daemon.wait_exit() == 0
    assert harness.cleanup(tmp_path) == []
