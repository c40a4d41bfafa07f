"""Issue 15 item 5: studies and tables say what they skipped, and a replay over several files pools
their jobs (each job counts once) instead of averaging files."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from benchmarks.gap import GapStudy, run_gap_study
from benchmarks.replay import ReplayStudy, paper_table, run_replay
from duetto.cli import app
from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir

DATA = shared_data_dir()
GAVEL = sorted((DATA / "gavel" / "msr_seed0").glob("*.trace"))[:2] if DATA.is_dir() else []


def _file(policy: str, jobs: int, large: int, large_jct: float, small_jct: float) -> dict:
    small = jobs - large
    total = (large * large_jct if large else 0.0) + small * small_jct
    return {
        "policy": policy,
        "jobs": jobs,
        "completed": jobs,
        "large_jobs": large,
        "small_jobs": small,
        "jct_avg": total / jobs,
        "large_jct_avg": large_jct if large else math.nan,
        "small_jct_avg": small_jct,
        "queueing_avg": 0.0,
        "large_queueing_avg": 0.0 if large else math.nan,
        "small_queueing_avg": 0.0,
        "makespan": 3600.0 * jobs,
        "jct_p99": math.nan,
        "large_jct_p99": math.nan,
        "small_jct_p99": math.nan,
    }


def test_several_files_pool_their_jobs() -> None:
    hour = 3600.0
    # a small file without large jobs, and a big one with both: averaging files put All below Small
    rows = pd.DataFrame([_file("p", 10, 0, 0.0, 10 * hour), _file("p", 100, 50, 90 * hour, 60 * hour)])
    cells = paper_table(rows).to_dict(orient="index")[("Average JCT", "p")]
    assert cells["All"] == pytest.approx((10 * 10 + 50 * 90 + 50 * 60) / 110)
    assert cells["Small"] == pytest.approx((10 * 10 + 50 * 60) / 60)
    assert cells["Large"] == pytest.approx(90.0)
    assert cells["Small"] <= cells["All"] <= cells["Large"]


@pytest.mark.skipif(len(GAVEL) < 2, reason="shared Gavel traces not found beside the repository")
def test_a_replay_of_two_traces_has_all_between_large_and_small(tmp_path: Path) -> None:
    study = ReplayStudy(trace="gavel", paths=tuple(str(p) for p in GAVEL), policies=("fifo", "sjf"), limit=60)
    outcome = run_replay(study, tmp_path, workers=1, progress=False, figures=False)
    table = outcome.tables["default"].to_dict(orient="index")
    for policy in ("fifo", "sjf"):
        cells = table[("Average JCT", policy)]
        if math.isfinite(cells["Large"]) and math.isfinite(cells["Small"]):
            low, high = sorted((cells["Large"], cells["Small"]))
            assert low - 1e-9 <= cells["All"] <= high + 1e-9, cells
        rows = outcome.rows[outcome.rows["policy"] == policy]
        pooled = sum(sum(jcts) for jcts in rows["job_jct"]) / sum(len(jcts) for jcts in rows["job_jct"])
        assert cells["All"] == pytest.approx(pooled / 3600.0)


class _NeedsMore:
    """A policy that cannot serve the random family (as Muri could not before it had derived stage times)."""

    name = "test-needs-more"
    preemptive = False
    round_length = None

    def check_instance(self, instance: object) -> None:
        raise DuettoInputError("needs per-stage times that this family lacks", field="profiles.stage_times")

    def decide(self, view: object) -> list:  # pragma: no cover - check_instance refuses first
        return []


def test_gap_console_shows_skipped_rows_with_their_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from heuristics import registry

    registry.available_policies()  # built-ins first; the test policy leaves the registry afterwards
    info = registry.PolicyInfo(_NeedsMore.name, lambda **_: _NeedsMore(), "test only: refuses every instance")
    monkeypatch.setitem(registry._REGISTRY, _NeedsMore.name, info)
    study = GapStudy(sizes=(4,), policies=("fifo", _NeedsMore.name), seeds=(0,), time_limit=5.0, arrivals=("zero",))
    outcome = run_gap_study(study, tmp_path, workers=1, progress=False, figures=False)
    refused = outcome.summary[outcome.summary["method"] == _NeedsMore.name]
    assert refused["note"].iloc[0].startswith("skipped: ") and "stage" in refused["note"].iloc[0]
    assert outcome.summary[outcome.summary["method"] == "fifo"]["note"].iloc[0] == ""
    arguments = ["gap", "--sizes", "4", "--policy", _NeedsMore.name, "--seeds", "1", "--arrivals", "zero"]
    arguments += ["--time-limit", "5", "--out", str(tmp_path), "--no-progress", "--no-figures", "--workers", "1"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    assert "skipped: " in result.output and "note" in result.output
