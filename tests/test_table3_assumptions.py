"""Issue 16 item 6: the SJF-BSBF Table III question answered with data (benchmarks/table3_assumptions.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.table3_assumptions import (
    FAMILY,
    Variant,
    default_variants,
    family_pair_table,
    ordering_table,
    run_study,
    scale_workload,
)
from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir

DATA = shared_data_dir()
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")
WORKLOAD = DATA / "pollux" / "workloads-1.5" / "workload-1.csv"


def test_family_pairs_come_from_gavels_measurements() -> None:
    table = family_pair_table()
    applications = set(pd.read_csv(WORKLOAD)["application"])
    assert applications <= set(FAMILY)  # every Pollux application is mapped
    assert len(table) == len(FAMILY) ** 2
    assert (table["ratio"].dropna() >= 1.0).all()
    # one pair recomputed from the flat CSV: ResNet-50 (imagenet) next to ResNet-18 (cifar10) on V100
    raw = pd.read_csv(DATA / "gavel" / "gavel_pairwise_colocation.csv")
    raw = raw[(raw["worker_type"] == "v100") & (raw["scale_factor"] == 1) & (raw["feasible"] == 1)]
    a = raw[raw["job_type_a"].str.startswith("ResNet-50") & raw["job_type_b"].str.startswith("ResNet-18")]
    b = raw[raw["job_type_b"].str.startswith("ResNet-50") & raw["job_type_a"].str.startswith("ResNet-18")]
    slowdowns = np.concatenate([a["slowdown_a"].to_numpy(), b["slowdown_b"].to_numpy()])
    row = table[(table["victim"] == "imagenet") & (table["other"] == "cifar10")].iloc[0]
    assert row["fitting"] == len(slowdowns)
    assert row["ratio"] == pytest.approx(max(1.0, math.exp(np.log(slowdowns).mean())))
    # yolov3 is mapped onto ResNet-50 too, so it shares imagenet's ratios
    yolo = table[(table["victim"] == "yolov3") & (table["other"] == "cifar10")].iloc[0]
    assert yolo["ratio"] == pytest.approx(row["ratio"])
    # pairs differ: a constant ξ loses exactly this spread
    assert table["ratio"].max() / table["ratio"].min() > 2
    with pytest.raises(DuettoInputError, match="worker type"):
        family_pair_table(worker_type="h100")


def test_scaled_workloads_keep_the_mix_and_the_period() -> None:
    frame = pd.read_csv(WORKLOAD)
    half = scale_workload(WORKLOAD, 0.5)
    assert len(half) == round(len(frame) / 2) and set(half["name"]) <= set(frame["name"])
    double = scale_workload(WORKLOAD, 2.0)
    assert len(double) == 2 * len(frame) and set(frame["name"]) <= set(double["name"])
    assert double["name"].is_unique and list(double.columns) == list(frame.columns)
    assert double["time"].is_monotonic_increasing
    assert set(double["time"]) <= set(frame["time"])  # copies arrive at the workload's submission times
    assert set(double["application"]) == set(frame["application"])
    pd.testing.assert_frame_equal(double, scale_workload(WORKLOAD, 2.0))  # seeded
    assert not double.equals(scale_workload(WORKLOAD, 2.0, seed=1))
    with pytest.raises(DuettoInputError, match="factor"):
        scale_workload(WORKLOAD, 0.0)


def test_a_small_study_validates_and_the_pair_ratios_move_the_numbers(tmp_path: Path) -> None:
    variants = [Variant(False, 0.0, 0.25), Variant(True, 30.0, 0.25)]
    table = run_study(tmp_path, workloads=1, policies=("sjf-bsbf", "tiresias", "sjf-ffs"), variants=variants)
    assert table["validated"].all() and len(table) == 6
    assert set(table["jobs"]) == {60}
    by = table.set_index(["variant", "policy"])["jct_avg_h"]
    constant, pairs = (v.label for v in variants)
    # sharing policies see the measured ratios; the restart cost reaches Tiresias' preemptions
    assert by[(pairs, "sjf-ffs")] != pytest.approx(by[(constant, "sjf-ffs")], rel=1e-6)
    assert (tmp_path / "pairs.csv").is_file() and (tmp_path / "assumptions.csv").is_file()
    summary = ordering_table(table)
    assert list(summary.index) == [constant, pairs]
    assert all(
        " < ".join(sorted(s.split(" < "))) == " < ".join(sorted(["sjf-bsbf", "tiresias", "sjf-ffs"]))
        for s in summary["ordering (best first)"]
    )
    # the default plan: each assumption alone, together, and the 120-480-job sweep without and with both
    labels = [v.label for v in default_variants()]
    assert len(labels) == len(set(labels)) == 10
    assert {v.factor for v in default_variants()} == {0.5, 1.0, 1.5, 2.0}
