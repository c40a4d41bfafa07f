"""The cluster runtime: a daemon that carries out plans on MPS-enabled GPU nodes (docs/runtime.md).

Layers, bottom up:

- :mod:`cluster_runtime.inventory` — GPUs from NVML, a fake spec (``"2x4"``) or a file;
- :mod:`cluster_runtime.mps` — one node's MPS control daemon (start, health, restart, quit);
- :mod:`cluster_runtime.supervise` / :mod:`cluster_runtime.agent` — launch wrappers and the node agent
  (start, watch, stop, re-adopt job processes);
- :mod:`cluster_runtime.backends` / :mod:`cluster_runtime.ray_backend` — local or Ray;
- :mod:`cluster_runtime.store` — SQLite (WAL) state;
- :mod:`cluster_runtime.plan`, :mod:`cluster_runtime.spec`, :mod:`cluster_runtime.replay` — what
  arrives (job specs, plans, computed schedules) and how it is checked;
- :mod:`cluster_runtime.reconciler` — the one reconcile logic (policies through ``heuristics.loop``);
- :mod:`cluster_runtime.daemon` / :mod:`cluster_runtime.api` — the daemon and its local API/client;
- :mod:`cluster_runtime.profiler` — Castor §7 profiling on the runtime.

Ray is imported only by the Ray backend.
"""

from cluster_runtime.api import DaemonUnavailable, RuntimeClient
from cluster_runtime.config import RuntimeConfig, load_config

__all__ = ["DaemonUnavailable", "RuntimeClient", "RuntimeConfig", "load_config"]
