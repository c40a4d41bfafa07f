"""The cluster: homogeneous nodes of identical GPUs.

GPUs are addressed by a flat index ``g`` in ``range(cluster.num_gpus)``; GPU ``g`` is GPU
``g % gpus_per_node`` of node ``g // gpus_per_node``. SPEC.md names GPUs ``(node, index)``; use
:meth:`Cluster.gpu_name` to print them that way.
"""

from __future__ import annotations

from dataclasses import dataclass

from formulation.errors import DuettoInputError


@dataclass(frozen=True, slots=True)
class Cluster:
    """A homogeneous GPU cluster.

    Parameters
    ----------
    nodes
        Number of servers.
    gpus_per_node
        Identical GPUs per server (the papers use 4 or 8).
    gpu_memory_gib
        Memory of every GPU, GiB (``M_gpu``).
    capacity
        ``C``: at most this many jobs on one GPU at any instant (the exact model uses 2).
    """

    nodes: int
    gpus_per_node: int
    gpu_memory_gib: float = 32.0
    capacity: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, int) or self.nodes < 1:
            raise DuettoInputError(f"must be a positive integer, got {self.nodes!r}", field="cluster.nodes")
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise DuettoInputError(
                f"must be a positive integer, got {self.gpus_per_node!r}", field="cluster.gpus_per_node"
            )
        if not self.gpu_memory_gib > 0:
            raise DuettoInputError(f"must be positive, got {self.gpu_memory_gib!r}", field="cluster.gpu_memory_gib")
        if not isinstance(self.capacity, int) or self.capacity < 1:
            raise DuettoInputError(f"must be an integer >= 1, got {self.capacity!r}", field="cluster.capacity")

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_of(self, gpu: int) -> int:
        """Node that holds flat GPU index ``gpu``."""
        return gpu // self.gpus_per_node

    def gpu_name(self, gpu: int) -> tuple[int, int]:
        """``(node, index)`` of flat GPU index ``gpu``."""
        return divmod(gpu, self.gpus_per_node)

    def gpu_label(self, gpu: int) -> str:
        node, index = self.gpu_name(gpu)
        return f"GPU {gpu} (node {node}, index {index})"

    def gpus_of_node(self, node: int) -> range:
        return range(node * self.gpus_per_node, (node + 1) * self.gpus_per_node)

    def nodes_spanned(self, gpus: tuple[int, ...] | list[int] | frozenset[int]) -> int:
        """How many distinct nodes a GPU set touches."""
        return len({g // self.gpus_per_node for g in gpus})

    def with_capacity(self, capacity: int) -> Cluster:
        return Cluster(self.nodes, self.gpus_per_node, self.gpu_memory_gib, capacity)
