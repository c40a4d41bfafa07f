"""``duetto demo``: the README's first command, end to end (a real CP-SAT solve and every policy)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from duetto.cli import app
from heuristics.registry import make_policy, policy_names


def test_demo_solves_validates_and_compares_every_policy() -> None:
    result = CliRunner().invoke(app, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    assert outcome["oracle"]["status"] == "optimal"
    assert outcome["oracle"]["objective"] == outcome["oracle"]["bound"]
    rows = {row["method"]: row for row in outcome["methods"]}
    assert set(rows) == {"oracle (cpsat)", *policy_names()}
    assert rows["oracle (cpsat)"]["valid"] is True and rows["oracle (cpsat)"]["gap"] == 0.0
    served = [name for name in policy_names() if rows[name]["valid"] is not None]
    assert {"sjf-bsbf", "sjf-bsbf-lookahead", "fifo", "tiresias"} <= set(served)
    for name in served:
        row = rows[name]
        assert row["valid"] is True, name
        assert row["gap_kind"] == "to optimum"
        if not make_policy(name).preemptive:  # a non-preemptive schedule can never beat the proven optimum
            assert row["gap"] >= -1e-9, (name, row["gap"])
    # the oracle starts from SJF-BSBF and its look-ahead in the same slotted semantics
    assert rows["oracle (cpsat)"]["total_jct"] <= min(
        rows["sjf-bsbf"]["total_jct"], rows["sjf-bsbf-lookahead"]["total_jct"]
    )
    for name in set(policy_names()) - set(served):  # Muri needs per-stage times: a reason, not a crash
        assert rows[name]["note"].startswith("n/a: ") and "stage_times" in rows[name]["note"]
