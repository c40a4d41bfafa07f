"""GPU inventory: which nodes and GPUs the runtime drives.

Three sources, one shape:

- real GPUs through NVML (``nvidia-ml-py``), chosen automatically when a driver is present;
- a fake inventory for machines without a GPU (tests, CI, benchmarks): ``"2x4"`` = 2 nodes of 4 GPUs;
- an inventory file (JSON) listing nodes and GPU UUIDs, for a fixed fleet or for hand-made test set-ups.

GPUs get flat ids ``node * gpus_per_node + index`` as everywhere in duetto (formulation/cluster.py);
the inventory must be homogeneous (same GPU count per node) because :class:`~formulation.Cluster` is.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError

_FAKE_SPEC = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU: its UUID (what ``CUDA_VISIBLE_DEVICES`` names), place and memory."""

    uuid: str
    node: int
    index: int
    memory_gib: float
    name: str = "fake"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node: its GPUs in index order and how to reach it."""

    index: int
    name: str
    address: str
    gpus: tuple[GpuInfo, ...]
    ray_node_id: str | None = None


@dataclass(frozen=True)
class Inventory:
    """Every node the runtime drives, in flat-id order."""

    nodes: tuple[NodeInfo, ...]
    fake: bool = False

    def __post_init__(self) -> None:
        if not self.nodes:
            raise DuettoInputError("the inventory has no node with a GPU", field="inventory")
        counts = {len(node.gpus) for node in self.nodes}
        if len(counts) != 1 or 0 in counts:
            raise DuettoInputError(
                "every node must have the same number of GPUs (>= 1); got "
                + ", ".join(f"{node.name}: {len(node.gpus)}" for node in self.nodes),
                field="inventory",
            )
        uuids = [gpu.uuid for node in self.nodes for gpu in node.gpus]
        if len(set(uuids)) != len(uuids):
            raise DuettoInputError("GPU UUIDs must be unique", field="inventory")

    @property
    def gpus_per_node(self) -> int:
        return len(self.nodes[0].gpus)

    @property
    def num_gpus(self) -> int:
        return len(self.nodes) * self.gpus_per_node

    @property
    def gpu_memory_gib(self) -> float:
        """The smallest GPU memory (the problem assumes identical GPUs; be safe if they differ)."""
        return min(gpu.memory_gib for node in self.nodes for gpu in node.gpus)

    def gpu(self, flat: int) -> GpuInfo:
        node, index = divmod(flat, self.gpus_per_node)
        return self.nodes[node].gpus[index]

    def flat_id(self, node: int, index: int) -> int:
        if not (0 <= node < len(self.nodes) and 0 <= index < self.gpus_per_node):
            raise DuettoInputError(
                f"unknown GPU (node {node}, index {index}): the inventory has {len(self.nodes)} node(s) "
                f"of {self.gpus_per_node} GPU(s)"
            )
        return node * self.gpus_per_node + index

    def flat_of_uuid(self, uuid: str) -> int | None:
        for node in self.nodes:
            for gpu in node.gpus:
                if gpu.uuid == uuid:
                    return node.index * self.gpus_per_node + gpu.index
        return None

    def cluster(self, capacity: int = 2) -> Cluster:
        """The :class:`~formulation.Cluster` this inventory is, with capacity ``C``."""
        return Cluster(len(self.nodes), self.gpus_per_node, self.gpu_memory_gib, capacity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fake": self.fake,
            "nodes": [
                {
                    "name": node.name,
                    "address": node.address,
                    "ray_node_id": node.ray_node_id,
                    "gpus": [{"uuid": g.uuid, "memory_gib": g.memory_gib, "name": g.name} for g in node.gpus],
                }
                for node in self.nodes
            ],
        }


def inventory_from_dict(data: Any, source: str = "inventory") -> Inventory:
    """Build an inventory from ``{"nodes": [{"name", "address", "gpus": [{"uuid", "memory_gib"}]}]}``."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise DuettoInputError("expected an object with a 'nodes' list", source=source, field="nodes")
    nodes = []
    for n, item in enumerate(data["nodes"]):
        if not isinstance(item, dict) or not isinstance(item.get("gpus"), list):
            raise DuettoInputError("each node needs a 'gpus' list", source=source, field=f"nodes.{n}.gpus")
        gpus = []
        for i, gpu in enumerate(item["gpus"]):
            if not isinstance(gpu, dict) or not isinstance(gpu.get("uuid"), str) or not gpu["uuid"]:
                raise DuettoInputError("each GPU needs a 'uuid' string", source=source, field=f"nodes.{n}.gpus.{i}")
            memory = gpu.get("memory_gib", 32.0)
            if not isinstance(memory, int | float) or not memory > 0:
                raise DuettoInputError(
                    f"must be > 0, got {memory!r}", source=source, field=f"nodes.{n}.gpus.{i}.memory_gib"
                )
            gpus.append(GpuInfo(gpu["uuid"], n, i, float(memory), str(gpu.get("name", "gpu"))))
        nodes.append(
            NodeInfo(
                n,
                str(item.get("name", f"node{n}")),
                str(item.get("address", "127.0.0.1")),
                tuple(gpus),
                item.get("ray_node_id"),
            )
        )
    try:
        return Inventory(tuple(nodes), fake=bool(data.get("fake", False)))
    except DuettoInputError as error:
        raise error.located(source) from None


def load_inventory_file(path: str | Path) -> Inventory:
    """Read an inventory JSON file (format of :func:`inventory_from_dict`)."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DuettoInputError("file not found", source=str(path)) from None
    except (OSError, json.JSONDecodeError) as error:
        raise DuettoInputError(f"cannot read inventory: {error}", source=str(path)) from None
    return inventory_from_dict(data, source=str(path))


def fake_gpus(node: int, count: int, memory_gib: float, tag: str = "") -> tuple[GpuInfo, ...]:
    """``count`` fake GPUs of one node, with UUIDs that say they are fake."""
    prefix = f"GPU-fake-{tag}-" if tag else "GPU-fake-"
    return tuple(GpuInfo(f"{prefix}n{node}-{i}", node, i, memory_gib, "fake") for i in range(count))


def fake_inventory(spec: str, memory_gib: float = 32.0) -> Inventory:
    """A fake inventory from ``"NODESxGPUS"`` (e.g. ``"2x4"``), all on this machine.

    Raises
    ------
    DuettoInputError
        If ``spec`` is not of the form ``NxG`` with positive integers.
    """
    match = _FAKE_SPEC.match(spec)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise DuettoInputError(f"expected NODESxGPUS such as '2x4', got {spec!r}", field="fake_gpus")
    nodes, per_node = int(match.group(1)), int(match.group(2))
    return Inventory(
        tuple(NodeInfo(n, f"fake-node{n}", "127.0.0.1", fake_gpus(n, per_node, memory_gib)) for n in range(nodes)),
        fake=True,
    )


def discover_local_gpus() -> list[tuple[str, float, str]] | None:
    """This machine's GPUs through NVML as ``(uuid, memory_gib, name)``, or ``None`` without a driver.

    NVML raises ``NVMLError_LibraryNotFound`` (or a driver error) when no NVIDIA driver is present;
    that is the clean "no GPU" path, not an error.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        result = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30
            result.append(
                (
                    uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    float(memory),
                    name.decode() if isinstance(name, bytes) else str(name),
                )
            )
        return result or None
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def local_inventory() -> Inventory | None:
    """This machine as a one-node inventory from NVML, or ``None`` when it has no GPU."""
    found = discover_local_gpus()
    if not found:
        return None
    gpus = tuple(GpuInfo(uuid, 0, i, memory, name) for i, (uuid, memory, name) in enumerate(found))
    return Inventory((NodeInfo(0, socket.gethostname(), "127.0.0.1", gpus),))


def resolve_inventory(
    fake: str | None = None,
    inventory_file: str | Path | None = None,
    memory_gib: float = 32.0,
) -> Inventory:
    """The local backend's inventory: a file or a fake spec when given, else the real GPUs.

    Raises
    ------
    DuettoInputError
        When nothing is given and NVML finds no GPU (with a hint to use ``--fake-gpus``).
    """
    if inventory_file is not None:
        return load_inventory_file(inventory_file)
    if fake is not None:
        return fake_inventory(fake, memory_gib)
    real = local_inventory()
    if real is None:
        raise DuettoInputError(
            "no NVIDIA GPU found through NVML (no driver?); pass --fake-gpus NODESxGPUS or "
            "--inventory FILE to run against a fake inventory"
        )
    return real


def renumber(nodes: Sequence[NodeInfo], fake: bool) -> Inventory:
    """An inventory from nodes discovered in some order: node indexes become their position."""
    fixed = []
    for n, node in enumerate(nodes):
        gpus = tuple(GpuInfo(g.uuid, n, i, g.memory_gib, g.name) for i, g in enumerate(node.gpus))
        fixed.append(NodeInfo(n, node.name, node.address, gpus, node.ray_node_id))
    return Inventory(tuple(fixed), fake=fake)
