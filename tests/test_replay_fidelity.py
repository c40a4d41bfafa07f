"""Replay fidelity (issue 16): Pollux workloads from anywhere (profiles fall back to the shared copy,
``--profiles DIR``); any measured pair table (``--interference table:FILE``: a plain CSV of ratios or of
isolated / co-located throughputs, Lucid's per-pair normalised speeds); SRTF and Themis; Muri's policies
on traces without measured stage times (stages derived from the Eq. 1-3 profile)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from benchmarks.replay import interference_from_spec
from duetto.cli import app
from formulation.cluster import Cluster
from formulation.errors import DuettoInputError, DuettoWarning
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference
from formulation.io import load_instance, load_schedule
from formulation.pair_tables import read_pair_table
from formulation.paths import shared_data_dir
from formulation.speed import Profile
from formulation.stages import DATA_LOADING_FRACTION, with_derived_stages
from formulation.traces import load_muri, load_pollux
from formulation.validator import validate
from heuristics import make_policy
from heuristics.simulator import simulate

DATA = shared_data_dir()
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")
POLLUX = DATA / "pollux" / "workloads-1.5" / "workload-1.csv"
TIRESIAS = DATA / "tiresias" / "60_job.csv"
cli = CliRunner()


def _elsewhere(tmp_path: Path, rows: int | None = None) -> Path:
    """A copy of a Pollux workload in a folder with no ``profiles`` anywhere near it."""
    folder = tmp_path / "elsewhere" / "deep"
    folder.mkdir(parents=True)
    target = folder / "workload-1.csv"
    lines = POLLUX.read_text().splitlines()
    target.write_text("\n".join(lines if rows is None else lines[: rows + 1]) + "\n")
    return target


def _scaled_profiles(tmp_path: Path, applications: set[str], factor: float) -> Path:
    """A profiles folder for ``applications`` whose measured step times are ``factor`` times the shared ones."""
    root = tmp_path / "my-profiles"
    for application in applications:
        source = DATA / "pollux" / "profiles" / application
        shutil.copytree(source, root / application)
        for name in ("placements.csv", "scalability.csv"):
            table = pd.read_csv(source / name)
            table["step_time"] = table["step_time"] * factor
            table.to_csv(root / application / name, index=False)
    return root


# --- item 5: Pollux workloads from anywhere -------------------------------------------------------------


def test_pollux_workload_elsewhere_uses_the_shared_profiles(tmp_path: Path) -> None:
    moved = load_pollux(_elsewhere(tmp_path))
    original = load_pollux(POLLUX)
    assert len(moved.jobs) == 240
    assert moved.jobs == original.jobs
    assert moved.profiles == original.profiles
    assert Path(moved.metadata["profiles"]).resolve() == (DATA / "pollux" / "profiles").resolve()


def test_pollux_profiles_option_changes_the_numbers(tmp_path: Path) -> None:
    workload = _elsewhere(tmp_path, rows=12)
    base = load_pollux(workload)
    applications = {job.profile.rsplit("-r", 1)[0] for job in base.jobs}
    slow = load_pollux(workload, profiles_dir=_scaled_profiles(tmp_path, applications, 2.0))
    for fast_job, slow_job in zip(base.jobs, slow.jobs, strict=True):
        ratio = slow.isolated_duration(slow_job) / base.isolated_duration(fast_job)
        assert ratio == pytest.approx(2.0, rel=0.01)  # Eq. 1-3 is homogeneous: twice the step times


def test_pollux_profiles_errors(tmp_path: Path) -> None:
    with pytest.raises(DuettoInputError, match="profiles folder not found"):
        load_pollux(POLLUX, profiles_dir=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DuettoInputError, match=r"row 1.*unknown application 'ncf'"):
        load_pollux(POLLUX, profiles_dir=tmp_path / "empty")


def test_profiles_on_import_simulate_and_replay(tmp_path: Path) -> None:
    workload = _elsewhere(tmp_path, rows=8)
    out = tmp_path / "w.json"
    plain = cli.invoke(app, ["import", "pollux", str(workload), "-o", str(out), "--json"])
    assert plain.exit_code == 0, plain.output
    base = json.loads(plain.output)
    applications = {line.split(",")[2] for line in workload.read_text().splitlines()[1:] if line.strip()}
    profiles = _scaled_profiles(tmp_path, applications, 3.0)
    scaled = cli.invoke(app, ["import", "pollux", str(workload), "--profiles", str(profiles), "-o", str(out), "--json"])
    assert scaled.exit_code == 0, scaled.output
    assert json.loads(scaled.output)["gpu_seconds"] == pytest.approx(3.0 * base["gpu_seconds"], rel=0.01)

    simulated = cli.invoke(
        app,
        ["simulate", str(workload), "--trace", "pollux", "--profiles", str(profiles), "--policy", "fifo", "--json"],
    )
    assert simulated.exit_code == 0, simulated.output
    assert json.loads(simulated.output)["valid"] is True

    replayed = cli.invoke(
        app,
        [
            *("replay", "pollux", str(workload), "--profiles", str(profiles), "--policy", "fifo"),
            *("--no-bound", "--no-figures", "--no-progress", "--workers", "1", "--out", str(tmp_path / "r")),
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    rows = pd.read_csv(tmp_path / "r" / "replay.csv")
    assert rows["validated"].all() and len(rows) == 1

    for args in (
        ["import", "muri", str(DATA / "muri" / "trace1.csv"), "--profiles", str(profiles)],
        ["import", "pollux", str(workload), "--profiles", str(tmp_path / "missing")],
        ["simulate", str(out), "--profiles", str(profiles), "--policy", "fifo"],
    ):
        bad = cli.invoke(app, [*args, "-o", str(tmp_path / "x.json")] if args[0] == "import" else args)
        assert bad.exit_code == 2, bad.output
        assert "Traceback" not in bad.output and "--profiles" in bad.output


# --- item 4: any measured pair table ------------------------------------------------------------------

MURI = DATA / "muri" / "trace1.csv"
LUCID_HEADER = (
    ",model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2,"
    "gpu_util,gmem_util,gmem"
)


def _ratio(instance, victim: str, other: str) -> float | None:
    return instance.interference.ratio(instance.profiles[victim], instance.profiles[other])


def test_plain_ratio_table_on_a_pollux_trace(tmp_path: Path) -> None:
    table = tmp_path / "pairs.csv"
    table.write_text("victim,other,ratio\ncifar10,ncf,1.8\nncf,cifar10,\ncifar10,cifar10,0.9\nbert,ncf,2\nbert,ncf,3\n")
    instance = load_pollux(POLLUX, limit=20)
    with pytest.warns(DuettoWarning, match=r"1 ratio\(s\) below 1.*row 3 \(cifar10 next to cifar10: 0.9\)"):
        model = interference_from_spec(f"table:{table}", instance)
    assert model is not None
    shared = instance.replace(interference=model)
    assert _ratio(shared, "cifar10-r6", "ncf-r1") == 1.8  # prefix match: cifar10 names cifar10-r6
    assert _ratio(shared, "ncf-r1", "cifar10-r12") is None  # empty ratio: may not share
    assert _ratio(shared, "cifar10-r6", "cifar10-r16") == 1.0  # clipped
    assert _ratio(shared, "bert-r6", "ncf-r1") == 2.5  # listed twice: the mean
    assert _ratio(shared, "imagenet-r24", "ncf-r1") == 1.5  # not in the table: the loader's constant
    result = simulate(shared, "sjf-bsbf")
    assert validate(shared, result.schedule).ok


def test_throughput_table_keeps_the_loaders_ratios_elsewhere(tmp_path: Path) -> None:
    table = tmp_path / "throughputs.csv"
    table.write_text("victim,other,isolated,colocated,note\nresnet18,vgg16,10,4,x\nvgg16,resnet18,8,0,y\n")
    instance = load_muri(MURI, limit=60)
    shared = instance.replace(interference=interference_from_spec(f"table:{table}", instance))
    assert _ratio(shared, "resnet18-b128-g1", "vgg16-b16-g8") == 2.5  # 10 / 4
    assert _ratio(shared, "vgg16-b16-g1", "resnet18-b128-g1") is None  # co-located 0: does not fit
    for victim, other in (("a2c-b64-g1", "bert-b4-g1"), ("vgg19-b16-g1", "vgg16-b16-g8")):
        assert _ratio(shared, victim, other) == _ratio(instance, victim, other)  # Muri's stage model
    result = simulate(shared, "sjf-ffs")
    assert validate(shared, result.schedule).ok


def test_lucid_table_both_directions_and_clipping(tmp_path: Path) -> None:
    table = tmp_path / "colocate_info.csv"
    table.write_text(
        LUCID_HEADER
        + "\n0,resnet18,CIFAR-10,1,128,0,0.8,vgg16,CIFAR-10,1,16,0,1.05,64.7,29.4,5106"
        + "\n1,resnet18,CIFAR-10,1,128,1,0.5,vgg16,CIFAR-10,1,16,0,0.5,64.7,29.4,5106"
        + "\n2,a2c,Pong,1,64,0,0.625,dqn,Pong,1,128,0,0,40,20,4000\n"
    )
    with pytest.warns(DuettoWarning, match=r"row 1 \(vgg16-b16 next to resnet18-b128: 0.952\)"):
        parsed = read_pair_table(table)
    assert parsed.layout == "lucid"
    assert parsed.pairs[("resnet18-b128", "vgg16-b16")] == 1.25
    assert parsed.pairs[("resnet18-b128-amp", "vgg16-b16")] == 2.0  # mixed precision is its own job
    instance = load_muri(MURI, limit=60)
    shared = instance.replace(interference=interference_from_spec(f"table:{table}", instance, warn=False))
    assert _ratio(shared, "resnet18-b128-g1", "vgg16-b16-g8") == 1.25
    assert _ratio(shared, "vgg16-b16-g1", "resnet18-b128-g1") == 1.0
    assert _ratio(shared, "a2c-b64-g8", "dqn-b128-g1") == 1.6
    assert _ratio(shared, "dqn-b128-g8", "a2c-b64-g1") is None  # speed 0: cannot run together
    assert validate(shared, simulate(shared, "sjf-bsbf").schedule).ok


def test_pair_table_errors(tmp_path: Path) -> None:
    instance = load_muri(MURI, limit=30)
    cases = {
        "victim,other,ratio\nresnet18,vgg16,1.2\nvgg16,resnet18,abc\n": r"row 2, field 'ratio'.*'abc'",
        "victim,other,ratio\nresnet18,vgg16,-1\n": r"row 1, field 'ratio'.*> 0",
        "victim,other,isolated,colocated\nresnet18,vgg16,0,3\n": r"row 1, field 'isolated'",
        "a,b,c\n1,2,3\n": "not a pair table",
        "victim,other,ratio\ngpt9,llama,1.5\n": "no pair of this instance's profiles",
    }
    for number, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"bad{number}.csv"
        path.write_text(text)
        with pytest.raises(DuettoInputError, match=message):
            interference_from_spec(f"table:{path}", instance)
    with pytest.raises(DuettoInputError, match="table:FILE"):
        interference_from_spec("table:", instance)


def test_table_interference_on_import_simulate_and_replay(tmp_path: Path) -> None:
    table = tmp_path / "pairs.csv"
    table.write_text("victim,other,ratio\nresnet18,vgg16,3.5\nvgg16,resnet18,0.95\n")
    spec = f"table:{table}"
    out = tmp_path / "t.json"
    imported = cli.invoke(app, ["import", "muri", str(MURI), "--limit", "60", "--interference", spec, "-o", str(out)])
    assert imported.exit_code == 0, imported.output
    assert "warning:" in imported.output and "row 2 (vgg16 next to resnet18: 0.95)" in imported.output
    instance = load_instance(out)
    assert _ratio(instance, "resnet18-b128-g1", "vgg16-b16-g8") == 3.5
    assert _ratio(instance, "vgg16-b16-g1", "resnet18-b128-g1") == 1.0

    schedule = tmp_path / "s.json"
    plain = load_instance(out).replace(interference=load_muri(MURI, limit=60).interference)
    simulated = cli.invoke(
        app,
        [
            *("simulate", str(MURI), "--trace", "muri", "--limit", "60", "--interference", spec),
            *("--policy", "sjf-bsbf", "-o", str(schedule), "--json"),
        ],
    )
    assert simulated.exit_code == 0, simulated.output
    assert validate(instance, load_schedule(schedule)).ok
    assert plain.interference != instance.interference

    replayed = cli.invoke(
        app,
        [
            *("replay", "muri", str(MURI), "--limit", "40", "--interference", spec, "--policy", "fifo"),
            *("--no-bound", "--no-figures", "--no-progress", "--workers", "1", "--out", str(tmp_path / "r")),
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    assert replayed.output.count("warning:") == 1  # once, not once per task
    rows = pd.read_csv(tmp_path / "r" / "replay.csv")
    assert rows["validated"].all() and rows["interference"].tolist() == [spec]

    bad = tmp_path / "bad.csv"
    bad.write_text("victim,other,ratio\nresnet18,vgg16,x\n")
    for args in (
        ["import", "muri", str(MURI), "--interference", f"table:{bad}", "-o", str(tmp_path / "x.json")],
        ["simulate", str(out), "--interference", f"table:{bad}", "--policy", "fifo"],
        [
            "replay",
            "muri",
            str(MURI),
            "--interference",
            f"table:{bad}",
            "--policy",
            "fifo",
            "--out",
            str(tmp_path / "b"),
        ],
    ):
        result = cli.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "row 1, field 'ratio'" in result.output and "Traceback" not in result.output


# --- item 3: the peers' missing baselines (SRTF, Themis) ----------------------------------------------


def _unit_instance(jobs: list[tuple[str, float, int, float]], gpus: int) -> Instance:
    """``jobs``: (id, arrival, GPUs, seconds alone); one iteration takes 1 s alone."""
    unit = Profile("unit", compute_beta=0.01, memory_base_gib=1.0, memory_per_sample_gib=0.01)
    return Instance(
        Cluster(1, gpus, 32.0, 2),
        tuple(Job(j, a, g, s, 100, "unit") for j, a, g, s in jobs),
        {"unit": unit},
        ConstantInterference(1.5),
    )


def _completions(instance: Instance, policy: str, **options: object) -> tuple[dict[str, float], int]:
    result = simulate(instance, policy, policy_options=dict(options))
    assert result.report.ok, result.report.violations[:3]
    assert validate(instance, result.schedule).ok
    assert not result.mismatches
    return result.completion, result.stats.preemptions


def test_srtf_ranks_by_remaining_time_not_gpu_time() -> None:
    # 2 GPUs. X (2 GPUs, 100 s) runs; L (1 GPU, 40 s) arrives at 1; S (2 GPUs, 30 s) at 2.
    instance = _unit_instance([("X", 0, 2, 100), ("L", 1, 1, 40), ("S", 2, 2, 30)], gpus=2)
    srtf, _ = _completions(instance, "srtf")
    # SRTF: L (40 s) preempts X at 1; S (30 s < L's 39 left) preempts L at 2; L resumes at 32.
    assert srtf == pytest.approx({"S": 32, "L": 71, "X": 170})
    srsf, _ = _completions(instance, "srsf")
    # SRSF ranks by GPU-time: L (39 GPU-s) keeps its GPU ahead of S (60 GPU-s), S waits for L.
    assert srsf == pytest.approx({"L": 41, "S": 71, "X": 170})


def test_themis_time_shares_equal_jobs_lease_by_lease() -> None:
    instance = _unit_instance([("A", 0, 1, 100), ("B", 0, 1, 100)], gpus=1)
    fair, preemptions = _completions(instance, "themis", lease=10.0)
    # SRTF runs A then B (100, 200); Themis serves the job with the worse finish-time fairness at every
    # 10-s lease, so the two alternate and both finish near the end.
    assert max(fair.values()) == pytest.approx(200)
    assert min(fair.values()) >= 190 - 1e-6
    assert preemptions >= 8  # ties keep the running job: a switch every lease or two
    srtf, _ = _completions(instance, "srtf")
    assert sorted(srtf.values()) == pytest.approx([100, 200])
    longer, fewer = _completions(instance, "themis", lease=50.0)
    assert fewer < preemptions and max(longer.values()) == pytest.approx(200)
    with pytest.raises(DuettoInputError, match="lease"):
        make_policy("themis", lease=0)


def test_themis_serves_the_job_treated_worst() -> None:
    # 1 GPU. W (300 s) waits from 0 behind R (50 s, first by instance order); N (20 s) arrives at 50 as R
    # ends. rho = T_sh / T_id with a 1/2 share: W (50 + 300) / 600 = 0.58 beats N (0 + 20) / 40 = 0.5, so
    # W runs at 50 although N is shorter (SRTF runs N). At the lease at 100 N has waited 50 s:
    # (50 + 20) / 40 = 1.75 against W's (100 + 250) / (100 + 500) = 0.58, so N preempts W.
    instance = _unit_instance([("R", 0, 1, 50), ("W", 0, 1, 300), ("N", 50, 1, 20)], gpus=1)
    fair, preemptions = _completions(instance, "themis", lease=50.0)
    assert fair == pytest.approx({"R": 50, "N": 120, "W": 370}) and preemptions == 1
    srtf, _ = _completions(instance, "srtf")
    assert srtf == pytest.approx({"R": 50, "N": 70, "W": 370})


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("pollux", POLLUX),
        ("gavel", sorted((DATA / "gavel" / "msr_seed0").glob("*.trace"))[0] if DATA.is_dir() else POLLUX),
        ("shockwave", sorted((DATA / "shockwave" / "traces").glob("*.trace"))[0] if DATA.is_dir() else POLLUX),
        ("muri", DATA / "muri" / "testbed_400_jobs.csv"),
    ],
)
def test_srtf_and_themis_validate_on_every_kind_of_trace(kind: str, path: Path) -> None:
    from formulation.traces import load_trace

    instance = load_trace(kind, path, limit=80)
    for policy in ("srtf", "themis"):
        result = simulate(instance, policy)
        assert result.report.ok and validate(instance, result.schedule).ok, (kind, policy)
        assert result.metrics is not None and result.metrics["completed"] == len(instance.jobs)


def test_srtf_and_themis_in_the_registry_and_a_replay(tmp_path: Path) -> None:
    listed = cli.invoke(app, ["policies", "--json"])
    names = [entry["name"] for entry in json.loads(listed.output)]
    assert {"srtf", "themis"} <= set(names)
    replayed = cli.invoke(
        app,
        [
            *("replay", "pollux", str(POLLUX), "--limit", "30", "--policy", "srtf", "--policy", "themis"),
            *("--no-bound", "--no-figures", "--no-progress", "--workers", "1", "--out", str(tmp_path)),
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    rows = pd.read_csv(tmp_path / "replay.csv")
    assert sorted(rows["policy"]) == ["srtf", "themis"] and rows["validated"].all()


# --- item 2: Muri's policies on traces without measured stages ------------------------------------------


def test_pollux_profiles_get_stages_from_eq_1_to_3() -> None:
    instance = load_pollux(POLLUX)
    assert all(profile.stage_times is not None for profile in instance.profiles.values())
    checked = 0
    for job in instance.jobs:
        profile = instance.profiles[job.profile]
        mode = instance.modes(job.id)[0]
        data, gpu, network = profile.stage_times  # type: ignore[misc]
        assert gpu == pytest.approx(mode.steps * profile.compute_time(mode.sub_batch))
        assert network == pytest.approx(profile.comm_time(job.num_gpus, instance.min_nodes(job)))
        assert data == pytest.approx(DATA_LOADING_FRACTION * gpu)
        assert (network > 0) == (job.num_gpus > 1)
        checked += 1
    assert checked == 240
    # measured stages are kept: a Muri trace is unchanged
    muri = load_muri(MURI, limit=50)
    assert with_derived_stages(muri) is muri
    assert muri.profiles["vgg16-b16-g1"].stage_times == pytest.approx((0.117, 0.068, 0.0))


@pytest.mark.parametrize(
    ("kind", "path"),
    [("pollux", POLLUX), ("pollux", DATA / "pollux" / "workloads" / "workload-3.csv"), ("tiresias", TIRESIAS)],
)
def test_muri_policies_run_on_traces_without_measured_stages(kind: str, path: Path) -> None:
    from formulation.traces import load_trace

    instance = load_trace(kind, path)
    for policy in ("muri-s", "muri-l"):
        result = simulate(instance, policy)
        assert result.report.ok and validate(instance, result.schedule).ok, (path, policy)
        assert result.metrics is not None and result.metrics["completed"] == len(instance.jobs)


def test_muri_policies_run_on_the_random_family_and_from_the_cli(tmp_path: Path) -> None:
    from formulation.generator import generate_instance

    for seed in range(3):
        instance = generate_instance(14, 1, 8, seed, arrivals="poisson")
        assert all(p.stage_times is not None for p in instance.profiles.values())
        for policy in ("muri-s", "muri-l"):
            assert validate(instance, simulate(instance, policy).schedule).ok
    result = cli.invoke(
        app, ["simulate", str(POLLUX), "--trace", "pollux", "--limit", "60", "--policy", "muri-s", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["valid"] is True


# --- item 1 (part): Muri's runtime model reachable from the CLI; the testbed against the authors' results


def test_duration_from_iterations_on_import_simulate_and_replay(tmp_path: Path) -> None:
    testbed = DATA / "muri" / "testbed_400_jobs.csv"
    seconds = {}
    for rule in ("duration", "iterations"):
        result = cli.invoke(
            app, ["import", "muri", str(testbed), "--duration-from", rule, "-o", str(tmp_path / "t.json"), "--json"]
        )
        assert result.exit_code == 0, result.output
        seconds[rule] = json.loads(result.output)["gpu_seconds"]
    expected = load_muri(testbed, duration_from="iterations")
    assert seconds["iterations"] == pytest.approx(
        sum(expected.isolated_duration(j) * j.num_gpus for j in expected.jobs)
    )
    assert seconds["iterations"] != pytest.approx(seconds["duration"], rel=0.01)
    simulated = cli.invoke(
        app,
        [
            *("simulate", str(testbed), "--trace", "muri", "--duration-from", "iterations", "--limit", "50"),
            *("--policy", "srsf", "--json"),
        ],
    )
    assert simulated.exit_code == 0 and json.loads(simulated.output)["valid"] is True, simulated.output
    for args in (
        ["import", "pollux", str(POLLUX), "--duration-from", "iterations", "-o", str(tmp_path / "x.json")],
        ["import", "muri", str(testbed), "--duration-from", "steps", "-o", str(tmp_path / "x.json")],
        ["simulate", str(tmp_path / "t.json"), "--duration-from", "iterations", "--policy", "fifo"],
    ):
        bad = cli.invoke(app, args)
        assert bad.exit_code == 2 and "--duration-from" in bad.output, bad.output


#: The authors' released testbed results (Rivendile/Muri, cluster_exp/results/<scheme>/result.out):
#: average JCT of the 400 jobs, seconds.
MURI_AUTHORS_JCT = {"muri-s": 117634.554467, "muri-l": 129744.660102, "srsf": 238612.092932, "tiresias": 336533.171665}


@pytest.mark.slow
def test_muri_testbed_with_the_authors_runtime_and_packing_is_within_15_percent(tmp_path: Path) -> None:
    # C = 4 (Muri packs up to 4 jobs per GPU) and the runtime = iterations × iteration_time (Muri's
    # simulator); not yet the defaults (issue 16 item 1). SPEC.md's progress rule (--semantics duetto): with
    # the Muri traces' default, Muri's simulator's rule, Muri-S/L land at 1.18× / 1.25× (docs/formats.md).
    replayed = cli.invoke(
        app,
        [
            *("replay", "muri", str(DATA / "muri" / "testbed_400_jobs.csv"), "--capacity", "4"),
            *("--duration-from", "iterations", "--semantics", "duetto"),
            *("--no-bound", "--no-figures", "--no-progress", "--workers", "1"),
            *(arg for policy in MURI_AUTHORS_JCT for arg in ("--policy", policy)),
            *("--out", str(tmp_path)),
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    rows = pd.read_csv(tmp_path / "replay.csv").set_index("policy")
    assert rows["validated"].all()
    for policy, authors in MURI_AUTHORS_JCT.items():
        assert rows.loc[policy, "jct_avg"] == pytest.approx(authors, rel=0.15), policy
    assert rows.loc["srsf", "jct_avg"] < rows.loc["tiresias", "jct_avg"]
    assert max(rows.loc["muri-s", "jct_avg"], rows.loc["muri-l", "jct_avg"]) < rows.loc["srsf", "jct_avg"]
