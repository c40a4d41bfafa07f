"""The authors' settings of each public trace kind: what a replay uses by default, and duetto's own.

Each trace was published with the scripts its authors ran it with. A replay matches their numbers only
with their settings (issue 16), so those are the defaults of :func:`formulation.traces.load_trace`,
``duetto import``, ``duetto simulate --trace`` and ``duetto replay``. ``settings="duetto"``
(``--settings duetto``) gives duetto's generic defaults instead (C = 2 on every kind, a Muri job's
runtime from the ``duration`` column, duetto's own Muri semantics), which were the defaults before.

The settings that change numbers *and* differ between the two are listed (the Muri traces' progress
rule under the authors' settings depends on the experiment a trace belongs to: ``None`` there means the
loader's per-experiment default); everything else (clusters, interference models, throughput files) is
the same under both and documented per kind in ``docs/formats.md``. Sources name the authors' file and
line (repository @ commit, as read).

Two kinds of setting:

* **loader** options (``capacity``, ``duration_from``, ``semantics``): the loaders' own keyword
  defaults are the authors' values, and ``settings="duetto"`` passes duetto's values for the ones not
  given;
* **policy** options (``muri-s`` / ``muri-l`` ``semantics``): recorded with the instance
  (``metadata["settings"]``) and applied by :func:`trace_policy_options` where a trace is simulated
  (``duetto simulate``, ``duetto replay``); an explicit ``--option`` wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from formulation.errors import DuettoInputError

if TYPE_CHECKING:
    from formulation.instance import Instance

Settings = Literal["authors", "duetto"]
SETTINGS: tuple[str, ...] = ("authors", "duetto")

_MURI = "Rivendile/Muri @ 7264b1a"
_TIRESIAS = "SymbioticLab/Tiresias @ b0ef844"


@dataclass(frozen=True)
class TraceSetting:
    """One setting that differs between a trace's authors and duetto.

    Attributes
    ----------
    option
        A loader keyword (``capacity``), or ``<policy>.<option>`` for a policy option.
    authors, duetto
        The value under each setting.
    source
        Where the authors set it (file and line of their scripts).
    """

    option: str
    authors: Any
    duetto: Any
    source: str

    @property
    def policy(self) -> str | None:
        """The policy a policy option belongs to (``None`` for a loader option)."""
        return self.option.split(".", 1)[0] if "." in self.option else None


#: Per trace kind, the settings where the authors' scripts differ from duetto's defaults.
KIND_SETTINGS: dict[str, tuple[TraceSetting, ...]] = {
    "muri": (
        TraceSetting(
            "capacity",
            4,
            2,
            f'{_MURI}: cluster_exp/run.sh line 29 `packing_nums=("4")` (testbed), simulator/run_sim.py '
            "line 86 `packing_num` default 4 (simulations)",
        ),
        TraceSetting(
            "duration_from",
            "iterations",
            "duration",
            f"{_MURI}: cluster_exp/jobs.py `add_job` sets `remaining_iterations = iterations`; "
            "cluster_exp/run.py `shortest_first_sim_jobs` runs `remaining_time = iteration_time × "
            "remaining_iterations` (simulator/run_sim.py the same)",
        ),
        # The progress rule, per experiment (authors: None = the rule of the trace's experiment,
        # formulation.traces.muri.muri_default_semantics). Measured with the other authors' settings,
        # duetto / the authors' average JCT (docs/results.md, docs/formats.md): the simulation traces under
        # Muri's simulator's rule against Muri's simulator run here (trace3: SRSF 1.00, Tiresias 1.08,
        # Muri-S 1.01, Muri-L 1.00); the testbed under SPEC.md's rule against the released real-cluster
        # averages (Muri-S 1.07, Muri-L 1.06, SRSF 0.94, Tiresias 1.02; under Muri's rule 1.18 / 1.25 /
        # 0.98 / 1.04, outside 15 %).
        TraceSetting(
            "semantics",
            None,
            "duetto",
            f"{_MURI}: simulator/jobs.py (`itertime_overhead_list`), matching.py (`calc_iteration_time`) and "
            "run_sim.py (`overhead_dict`, completions) for the simulation traces (simulator/trace-data: "
            "semantics 'muri'); cluster_exp/results/<scheme>/result.out, the released testbed averages "
            "(a real 64-GPU cluster), are matched under SPEC.md's rule (testbed: semantics 'duetto')",
        ),
        TraceSetting(
            "muri-s.semantics",
            "muri",
            "duetto",
            f"{_MURI}: cluster_exp/run.py and simulator/run_sim.py `multi_resource_blossom_same_sim_jobs`: "
            "replan at every arrival and completion",
        ),
        TraceSetting(
            "muri-l.semantics",
            "muri",
            "duetto",
            f"{_MURI}: `multi_resource_blossom_same_sim_jobs(..., know_duration=False)`: replan at every "
            "event, order by total attained GPU time (no 2D-LAS queues)",
        ),
    ),
    "tiresias": (
        TraceSetting(
            "capacity",
            1,
            2,
            f"{_TIRESIAS}: simulator/README.md section 4 and run_sim.py `try_get_job_res`: every placement "
            "scheme hands out free GPUs only; Tiresias never shares a GPU",
        ),
    ),
}


def check_settings(settings: str) -> Settings:
    """``settings`` if it names a known setting, else a one-line error."""
    if settings not in SETTINGS:
        raise DuettoInputError(f"must be one of {', '.join(SETTINGS)}, got {settings!r}", field="settings")
    return settings  # type: ignore[return-value]


def loader_settings(kind: str, settings: str = "authors") -> dict[str, Any]:
    """The loader keywords that ``settings`` gives trace ``kind`` (the loaders' defaults are the authors').

    Parameters
    ----------
    kind
        Trace format.
    settings
        ``"authors"`` or ``"duetto"``.

    Returns
    -------
    dict
        Loader keyword → value, for the settings that differ between the two.
    """
    chosen = check_settings(settings)
    return {s.option: getattr(s, chosen) for s in KIND_SETTINGS.get(kind, ()) if s.policy is None}


def policy_settings(kind: str, policy: str, settings: str = "authors") -> dict[str, Any]:
    """Policy options ``settings`` gives ``policy`` on a trace of ``kind`` (empty under ``"duetto"``)."""
    chosen = check_settings(settings)
    if chosen == "duetto":
        return {}
    return {
        s.option.split(".", 1)[1]: s.authors for s in KIND_SETTINGS.get(kind, ()) if s.policy == str(policy).lower()
    }


def trace_policy_options(instance: Instance, policy: Any, explicit: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options to simulate ``policy`` on ``instance`` with: its trace's authors' settings, then ``explicit``.

    An instance loaded from a public trace records its kind (``metadata["source"]``) and its settings
    (``metadata["settings"]``, ``"authors"`` unless loaded with ``settings="duetto"``). For any other
    instance (generated, hand-written) or a policy object, this is ``explicit`` unchanged.

    Parameters
    ----------
    instance
        The instance to simulate.
    policy
        A policy name (``muri-l``) or object.
    explicit
        Options the user gave (``--option``); they win over the trace's.

    Returns
    -------
    dict
        Policy options.
    """
    options: dict[str, Any] = {}
    metadata = instance.metadata or {}
    kind = metadata.get("source")
    if isinstance(policy, str) and isinstance(kind, str) and kind in KIND_SETTINGS:
        options = policy_settings(kind, policy, str(metadata.get("settings", "authors")))
    return options | dict(explicit or {})


__all__ = [
    "KIND_SETTINGS",
    "SETTINGS",
    "Settings",
    "TraceSetting",
    "check_settings",
    "loader_settings",
    "policy_settings",
    "trace_policy_options",
]
