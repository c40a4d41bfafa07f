"""Every registered policy on every public trace in ../shared/data: the simulated schedule passes the
validator and the validator's completion times equal the simulator's (1e-6 relative).

The default run uses a prefix of each trace (the first jobs by arrival, ``Instance.head``) so that the
suite stays fast; ``-m slow`` runs the full traces. A policy that cannot serve a trace (e.g. Muri
needs per-stage times) must say so with a :class:`DuettoInputError` naming what is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.paths import shared_data_dir
from heuristics import available_policies, simulate

DATA = shared_data_dir()
PREFIX = 40

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")


def public_traces() -> list[tuple[str, Path]]:
    """``(kind, path)`` of every public trace file."""
    if not DATA.is_dir():
        return []
    traces: list[tuple[str, Path]] = []
    traces += [("muri", p) for p in sorted((DATA / "muri").glob("*.csv")) if not p.name.startswith("cluster")]
    traces += [("tiresias", p) for p in sorted((DATA / "tiresias").glob("*_job.csv"))]
    traces += [("gavel", p) for p in sorted((DATA / "gavel" / "msr_seed0").glob("*.trace"))]
    traces += [("shockwave", p) for p in sorted((DATA / "shockwave" / "traces").glob("*.trace"))]
    traces += [("pollux", p) for p in sorted(DATA.glob("pollux/workloads*/*.csv"))]
    return traces


TRACES = public_traces()
POLICIES = [info.name for info in available_policies()]


def _label(item: tuple[str, Path]) -> str:
    kind, path = item
    return f"{kind}:{path.parent.name}/{path.stem[:24]}"


def _load(kind: str, path: Path) -> Instance:
    from formulation.traces import load_trace

    return load_trace(kind, path)


def _check_all_policies(instance: Instance) -> None:
    failures = []
    for name in POLICIES:
        try:
            result = simulate(instance, name, metrics=False)
        except DuettoInputError as error:
            # A policy that cannot serve this trace must say what is missing, not crash.
            assert str(error), name
            continue
        if not result.report.ok:
            failures.append(f"{name}: {[str(v) for v in result.report.violations[:3]]}")
        elif result.mismatches:
            failures.append(f"{name}: completion mismatches {list(result.mismatches.items())[:3]}")
    assert not failures, f"{instance.name}: " + "; ".join(failures)


def test_the_public_traces_are_all_there() -> None:
    kinds = {kind for kind, _ in TRACES}
    assert kinds == {"muri", "tiresias", "gavel", "shockwave", "pollux"}
    assert len(TRACES) >= 50


@pytest.mark.parametrize("trace", TRACES, ids=[_label(t) for t in TRACES])
def test_every_policy_on_a_trace_prefix(trace: tuple[str, Path]) -> None:
    kind, path = trace
    instance = _load(kind, path)
    _check_all_policies(instance.head(PREFIX) if len(instance.jobs) > PREFIX else instance)
    if kind == "muri":
        # and under the other progress rule than the file's default (Muri's simulator's for the simulation
        # traces, SPEC.md's for the testbed): every Muri file under both rules
        from formulation.traces import load_trace
        from formulation.traces.muri import muri_default_semantics

        other = "duetto" if muri_default_semantics(path) == "muri" else "muri"
        _check_all_policies(load_trace(kind, path, limit=PREFIX, semantics=other))


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=[_label(t) for t in TRACES])
def test_every_policy_on_the_full_trace(trace: tuple[str, Path]) -> None:
    kind, path = trace
    _check_all_policies(_load(kind, path))
