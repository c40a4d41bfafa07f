"""Profiling on the runtime (Castor §7) with the stand-in job: bounded runs alone and next to a
partner, the iteration-time fit, the measured interference ratio, and the daemon using them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "runtime_fixtures"))

import harness

from cluster_runtime.backends import LocalBackend
from cluster_runtime.config import RuntimeConfig
from cluster_runtime.inventory import fake_inventory
from cluster_runtime.reconciler import Reconciler
from cluster_runtime.store import Store
from duetto.commands.runtime import register

app = typer.Typer()
register(app)

ALPHA, BETA, BATCH, SLOWDOWN = 0.02, 0.001, 32, 0.5


def test_profile_fits_eq1_and_measures_interference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", harness.runtime_env()["PATH"])
    contention = tmp_path / "contention"
    shared = ("--contention-dir", str(contention), "--slowdown", str(SLOWDOWN))
    job = harness.job_spec("prof", iterations=10_000, batch_size=BATCH, alpha=ALPHA, beta=BETA, args=shared)
    partner = harness.job_spec("mate", iterations=10_000, batch_size=8, alpha=0.03, args=shared)
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "partner.json").write_text(json.dumps(partner))
    state = tmp_path / "s"
    result = CliRunner().invoke(
        app,
        [
            "profile",
            str(tmp_path / "job.json"),
            "--partner",
            str(tmp_path / "partner.json"),
            "--seconds",
            "1.5",
            "--steps",
            "1,2",
            "--state",
            str(state),
            "--fake-gpus",
            "1x1",
            "--json",
        ],
        env=harness.runtime_env(),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    fitted = report["profile"]
    # t_iter(s) = s*alpha + beta*B: 0.052 s with one step, 0.072 s with two (sleep overhead is small).
    assert fitted["compute_alpha"] == pytest.approx(ALPHA, rel=0.2)
    assert fitted["compute_beta"] == pytest.approx(BETA, rel=0.15)
    assert fitted["memory_base_gib"] == 1.0  # kept from the known profile: one GPU does not measure it
    alone = {(m["job_id"], m["steps"]): m["iteration_time"] for m in report["alone"]}
    assert alone[("prof", 1)] == pytest.approx(ALPHA + BETA * BATCH, rel=0.1)
    assert alone[("prof", 2)] == pytest.approx(2 * ALPHA + BETA * BATCH, rel=0.1)
    ratios = {(r["victim"], r["other"]): r["xi"] for r in report["ratios"]}
    assert ratios[("standin-prof", "standin-mate")] == pytest.approx(1 + SLOWDOWN, abs=0.12)
    assert ratios[("standin-mate", "standin-prof")] == pytest.approx(1 + SLOWDOWN, abs=0.12)
    assert harness.cleanup(tmp_path) == []
    assert not harness.mps_pids(state)  # profiling started MPS itself, so it quit it

    # The measurements are in the state database; the daemon's instance uses them.
    config = RuntimeConfig(state_dir=state, fake_gpus="1x1")
    store = Store(config.db_path)
    reconciler = Reconciler(store, LocalBackend(config, fake_inventory("1x1")), config)
    reconciler.submit({**job, "profile": "standin-prof"})  # known by name only through the measurement
    reconciler.submit(partner)
    instance = reconciler.instance()
    assert instance.profiles["standin-prof"].compute_beta == pytest.approx(fitted["compute_beta"])
    assert instance.ratio("prof", "mate") == pytest.approx(ratios[("standin-prof", "standin-mate")])
    assert instance.ratio("mate", "prof") == pytest.approx(ratios[("standin-mate", "standin-prof")])
    store.close()
