"""Every example in ``examples/`` runs as a user would run it, and says what its documentation says.

* ``examples/runtime``: a real daemon (fake GPU inventory, the stand-in MPS control program on PATH)
  started with the example's profiles, ``duetto submit`` of the example's job file from another
  folder, and the example's training script run to completion by the runtime;
* ``examples/gap_study.py`` and ``examples/oracle_walkthrough.py``: run as scripts (their own process,
  as ``python examples/...``), their numbers checked against the public API.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "runtime_fixtures"))

import harness

import duetto

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture
def workdir(tmp_path: Path):
    yield tmp_path
    assert harness.cleanup(tmp_path) == [], "a test left processes behind"


def _run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env or dict(os.environ), timeout=timeout
    )


def test_the_runtime_example_is_accepted_and_runs_to_completion(workdir: Path) -> None:
    state = workdir / "state"
    profiles = EXAMPLES / "runtime" / "profiles.json"
    daemon = harness.DaemonProcess(state, "--fake-gpus", "1x2", "--profiles", str(profiles), "--policy", "sjf-bsbf")
    daemon.start()
    try:
        elsewhere = workdir / "elsewhere"  # the job file's relative workdir does not depend on where you are
        elsewhere.mkdir()
        env = harness.runtime_env()
        submit = _run(
            "-m",
            "duetto",
            "submit",
            str(EXAMPLES / "runtime" / "job.json"),
            "--state",
            str(state),
            cwd=elsewhere,
            env=env,
        )
        assert submit.returncode == 0, submit.stderr
        assert submit.stdout.split() == ["submitted", "bert-1", "submitted", "resnet-1"]
        status = daemon.client.wait_until(
            lambda s: all(job["state"] in ("completed", "failed") for job in s["jobs"]), timeout=120
        )
        jobs = {job["id"]: job for job in status["jobs"]}
        specs = {spec["id"]: spec for spec in json.loads((EXAMPLES / "runtime" / "job.json").read_text())}
        assert {k: v["state"] for k, v in jobs.items()} == {"bert-1": "completed", "resnet-1": "completed"}
        for job_id, spec in specs.items():
            logs = _run("-m", "duetto", "logs", job_id, "--state", str(state), cwd=elsewhere, env=env)
            assert logs.returncode == 0, logs.stderr
            model = job_id.split("-")[0]
            # the script ran from examples/runtime, got the contract's values and did every iteration
            assert f"iterations 0..{spec['iterations']}" in logs.stdout and f"{model}: done" in logs.stdout
            sub_batch, steps = map(int, re.search(r"micro-batch (\d+) x (\d+)", logs.stdout).groups())  # type: ignore[union-attr]
            assert sub_batch * steps == spec["batch_size"]
    finally:
        daemon.stop()


def test_the_documented_job_spec_is_the_example() -> None:
    """docs/runtime.md shows the example's job spec (it used to name a profile no daemon knew)."""
    text = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    contract = text[text.index("## The job contract") :]
    block = contract[contract.index("```json") + len("```json") : contract.index("```", contract.index("```json") + 7)]
    assert json.loads(block) == json.loads((EXAMPLES / "runtime" / "job.json").read_text())[0]
    assert "--profiles examples/runtime/profiles.json" in text and "submit examples/runtime/job.json" in text


def test_the_gap_study_example_prints_the_gaps_of_its_dataframe(tmp_path: Path) -> None:
    run = _run(str(EXAMPLES / "gap_study.py"), "--seeds", "1", "--out", str(tmp_path / "gap"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "2 instances, 10/10 schedules valid" in run.stdout
    import pandas as pd

    rows = pd.read_csv(tmp_path / "gap" / "gap.csv")  # the DataFrame the script built, as the study stored it
    assert len(rows) == 2 * 5 and rows["validated"].all() and (rows["gap_kind"] == "optimum").all()
    table = [line.split() for line in run.stdout.splitlines()[2:]]
    printed = {cells[0]: cells[1:] for cells in table if len(cells) == 4}
    medians = rows[rows["method_kind"] == "policy"].groupby("method")["gap"].median()
    assert set(printed) == set(medians.index) == {"fifo", "sjf", "tiresias", "sjf-bsbf"}
    for method, median in medians.items():
        assert float(printed[str(method)][0]) == pytest.approx(median, abs=5e-4)
    assert medians["sjf-bsbf"] <= medians["fifo"]  # the point of the study: sharing-aware SJF is closer


def test_the_oracle_walkthrough_runs_every_step(tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    run = _run(str(EXAMPLES / "oracle_walkthrough.py"), "--highs-seconds", "5", "--out", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    steps = [line.split(".")[0] for line in run.stdout.splitlines() if re.match(r"^\d\. ", line)]
    assert steps == [str(i) for i in range(1, 9)]
    instance = duetto.load_instance(out / "instance.json")
    schedule = duetto.load_schedule(out / "optimal.json")
    report = duetto.validate(instance, schedule)
    total = duetto.compute_metrics(instance, report)["total_jct"]
    assert report.ok and f"cpsat: optimal, total JCT {total:.0f} s, bound {total:.0f} s" in run.stdout
    bracket = re.search(r"bound (\d+) s <= optimum (\d+) s <= its schedule (\d+) s", run.stdout)
    assert bracket is not None
    low, optimum, high = map(int, bracket.groups())
    assert low <= optimum <= high and optimum == round(total)
    gap = re.search(r"sjf-bsbf: total JCT (\d+) s, ([\d.]+) % above", run.stdout)
    assert gap is not None
    policy: Any = duetto.simulate(instance, "sjf-bsbf", slot=schedule.slot)
    assert float(gap.group(1)) == pytest.approx(policy.metrics["total_jct"], abs=0.5)
    assert (out / "optimal.png").stat().st_size > 10_000
