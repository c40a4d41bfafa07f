"""Trace loaders: every shared trace loads with the right job count, known rows come out in the right
seconds, and bad input gives errors that name file, row/line and column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formulation import io
from formulation.errors import DuettoInputError, InfeasibleInstanceError
from formulation.interference import ConstantInterference, StageInterference, TableInterference
from formulation.paths import shared_data_dir
from formulation.traces import (
    TRACE_KINDS,
    fit_pollux_application,
    gavel_interference_table,
    load_gavel,
    load_muri,
    load_pollux,
    load_shockwave,
    load_tiresias,
    load_trace,
    parse_gavel_trace,
    pollux_fit_report,
)
from formulation.traces.pollux import per_gpu_batch

DATA = shared_data_dir()
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")

MURI_HEADER = (
    "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time,"
    "resource_time_0,resource_time_1,resource_time_2,priority"
)


# --- Muri ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "count"),
    [
        ("trace1.csv", 1494),
        ("trace2.csv", 5755),
        ("trace3.csv", 992),
        ("trace4.csv", 2638),
        ("trace1_pr.csv", 1494),
        ("trace2_pr.csv", 5755),
        ("trace3_pr.csv", 992),
        ("trace4_pr.csv", 2638),
        ("job_type_1.csv", 992),
        ("job_type_2.csv", 992),
        ("job_type_3.csv", 992),
        ("job_type_4.csv", 992),
        ("testbed_400_jobs.csv", 400),
    ],
)
def test_muri_files_load(file: str, count: int) -> None:
    inst = load_muri(DATA / "muri" / file)
    assert len(inst.jobs) == count
    assert (inst.cluster.nodes, inst.cluster.gpus_per_node) == (8, 8)  # read from cluster_n8g8.csv
    assert isinstance(inst.interference, StageInterference)
    if file.endswith("_pr.csv"):
        assert all(job.arrival == 0.0 for job in inst.jobs)
    else:
        assert max(job.arrival for job in inst.jobs) > 0


def test_muri_known_rows_in_seconds() -> None:
    inst = load_muri(DATA / "muri" / "trace2.csv", duration_from="duration")
    job0 = inst.job("0")
    # 0,16,0,4378042,vgg16,16,1453510000,3840000,332,83,68,110,0
    assert (job0.num_gpus, job0.arrival, job0.batch_size) == (16, 0.0, 16)
    assert inst.isolated_duration(job0) == pytest.approx(1453510.0, rel=1e-12)
    # the default (the authors' runtime model): iterations × iteration_time
    assert load_muri(DATA / "muri" / "trace2.csv", limit=1).isolated_duration("0") == pytest.approx(4378042 * 0.332)
    assert inst.iteration_time(job0) == pytest.approx(0.332)
    assert inst.profile_of(job0).stage_times == pytest.approx((0.083, 0.068, 0.110))
    # 1,1,27069000,5190727,a2c,64,2683606000,13956000,517,514,14,0,1
    job1 = inst.job("1")
    assert job1.arrival == pytest.approx(27069.0)
    assert inst.isolated_duration(job1) == pytest.approx(2683606.0, rel=1e-12)
    # Muri Eq. 3 by hand: offsets (0, 1) give T = .083 + .068 + .514 = .665 s per iteration
    assert inst.ratio("0", "1") == pytest.approx(0.665 / 0.261)
    assert inst.ratio("1", "0") == pytest.approx(0.665 / 0.528)
    # jobs of one (model, batch, GPUs, timing) share a profile
    assert len(inst.profiles) == 48


def test_muri_testbed_and_duration_from_iterations() -> None:
    inst = load_muri(DATA / "muri" / "testbed_400_jobs.csv", duration_from="duration")
    # 0,8,0,10956,gpt2,4,5095000,91000,437,0.6,419,49,0
    assert inst.isolated_duration("0") == pytest.approx(5095.0)
    assert inst.job("1").arrival == pytest.approx(1534.0)
    by_iterations = load_muri(DATA / "muri" / "trace2.csv", duration_from="iterations", limit=3)
    assert by_iterations.job("0").iterations == 4378042
    assert by_iterations.isolated_duration("0") == pytest.approx(4378042 * 0.332)


def test_muri_cluster_too_small_names_the_job() -> None:
    with pytest.raises(InfeasibleInstanceError) as info:
        load_muri(DATA / "muri" / "trace2.csv", nodes=1, gpus_per_node=8)
    message = str(info.value)
    assert "job '0'" in message and "16 GPUs" in message and "row 1" in message and "trace2.csv" in message
    bigger = load_muri(DATA / "muri" / "trace2.csv", nodes=4, gpus_per_node=8, limit=50)
    assert len(bigger.jobs) == 50 and bigger.cluster.num_gpus == 32


def test_muri_limit_and_round_trip() -> None:
    inst = load_muri(DATA / "muri" / "trace3.csv", limit=20)
    assert [job.id for job in inst.jobs] == [str(i) for i in range(20)]
    data = io.instance_to_dict(inst)
    assert io.instance_to_dict(io.instance_from_dict(json.loads(json.dumps(data)))) == data


# --- Tiresias -------------------------------------------------------------------------------------


def test_tiresias_loads() -> None:
    inst = load_tiresias(DATA / "tiresias" / "60_job.csv")
    assert len(inst.jobs) == 60
    assert (inst.cluster.nodes, inst.cluster.gpus_per_node) == (32, 4)
    assert isinstance(inst.interference, ConstantInterference) and inst.interference.xi == 1.5
    # 0,1,0,606,vgg19,164,30 and 1,8,30,133,vgg11,147,23 (seconds)
    assert inst.isolated_duration("0") == pytest.approx(164.0)
    assert inst.job("0").iterations == 606
    assert (inst.job("1").arrival, inst.job("1").num_gpus) == (30.0, 8)
    assert inst.isolated_duration("1") == pytest.approx(147.0)
    assert inst.iteration_time("1") == pytest.approx(147.0 / 133)


# --- Gavel ----------------------------------------------------------------------------------------


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


@pytest.mark.parametrize("trace", sorted((DATA / "gavel" / "msr_seed0").glob("*.trace")), ids=lambda p: p.stem)
def test_gavel_msr_traces_load(trace: Path) -> None:
    inst = load_gavel(trace)
    assert len(inst.jobs) == _lines(trace)
    assert inst.cluster.num_gpus == 64
    for job in inst.jobs[:50]:
        assert inst.isolated_duration(job) > 0


def test_gavel_has_fifteen_msr_traces() -> None:
    assert len(list((DATA / "gavel" / "msr_seed0").glob("*.trace"))) == 15


def test_gavel_known_rows() -> None:
    inst = load_gavel(DATA / "gavel" / "msr_seed0" / "795a4c.trace")
    # Transformer (batch size 128) ... 79561 steps, arrival 0, 1 GPU; v100 5.44610521981264 steps/s
    j0 = inst.job("j0")
    assert (j0.arrival, j0.num_gpus, j0.batch_size, j0.iterations) == (0.0, 1, 128, 79561)
    assert inst.isolated_duration(j0) == pytest.approx(79561 / 5.44610521981264)
    # Recommendation (batch size 8192), 1066 steps, arrival 1511 s; 2.841510364354536 steps/s
    j1 = inst.job("j1")
    assert j1.arrival == 1511.0
    assert inst.isolated_duration(j1) == pytest.approx(1066 / 2.841510364354536)
    # measured pair ratios carry over to profile names
    assert (
        inst.ratio("j0", "j1")
        == gavel_interference_table().pairs[("Transformer (batch size 128)", "Recommendation (batch size 8192)")]
    )


def test_gavel_interference_table() -> None:
    table = gavel_interference_table("v100")
    assert len(table.pairs) == 26 * 26
    infeasible = [pair for pair, xi in table.pairs.items() if xi is None]
    assert len(infeasible) == 40  # 21 of the 351 one-GPU pairs do not fit: 19 mixed (x2) + 2 self pairs
    assert table.pairs[("A3C", "ResNet-18 (batch size 16)")] == pytest.approx(1.287541)
    assert table.pairs[("ResNet-18 (batch size 16)", "A3C")] == pytest.approx(1.0)
    assert table.pairs[("A3C", "ResNet-50 (batch size 128)")] is None
    assert table.pairs[("ResNet-50 (batch size 128)", "A3C")] is None
    assert all(xi is None or xi >= 1.0 for xi in table.pairs.values())
    with pytest.raises(DuettoInputError, match="worker type"):
        gavel_interference_table("h100")


def test_gavel_other_field_counts_and_extrapolation(tmp_path: Path) -> None:
    seven = "ResNet-18 (batch size 16)\tpython3 x\t--num_steps\t1\t1000\t5.0\t16"
    nine = "Recommendation (batch size 512)\tcmd\t-n\t1\t500\t4\t1\t-1\t7.5"
    ten = "Recommendation (batch size 512)\tcmd\trecommendation\t-n\t1\t500\t1\t1\t-1\t9"
    twelve = "LM (batch size 10)\tcmd\tlm\t--steps\t1\t2000\t1\tgns\t1\t-1.000000\t100\t12"
    trace = tmp_path / "mixed.trace"
    trace.write_text("\n".join([seven, nine, "", ten, twelve]) + "\n")
    inst = load_gavel(trace, throughputs=DATA / "gavel" / "simulation_throughputs.json")
    assert [job.arrival for job in inst.jobs] == [5.0, 7.5, 9.0, 12.0]
    assert [job.num_gpus for job in inst.jobs] == [16, 4, 1, 1]
    # 16 GPUs: measured up to 8 (382.5974 steps/s), scaled linearly
    assert inst.isolated_duration("j0") == pytest.approx(1000 / (382.5974422686407 * 2))
    # 4-GPU Recommendation: only 1 GPU measured (23.3176 steps/s)
    assert inst.isolated_duration("j1") == pytest.approx(500 / (23.317634950657975 * 4))
    assert inst.metadata["extrapolated_throughputs"] == 2
    assert inst.job("j0").profile == "ResNet-18 (batch size 16) x16"
    with pytest.raises(DuettoInputError, match="no throughput at this scale factor") as info:
        load_gavel(trace, missing_throughput="error")
    assert "line 1" in str(info.value)


def test_gavel_bad_lines(tmp_path: Path) -> None:
    bad_count = tmp_path / "count.trace"
    bad_count.write_text("A3C\tcmd\t-n\t1\t100\t0\t1\nA3C\tcmd\t-n\t1\t100\t0\n")
    with pytest.raises(DuettoInputError) as info:
        parse_gavel_trace(bad_count)
    assert "line 2" in str(info.value) and "6 tab-separated fields" in str(info.value)
    bad_steps = tmp_path / "steps.trace"
    bad_steps.write_text("A3C\tcmd\t-n\t1\tmany\t0\t1\n")
    with pytest.raises(DuettoInputError) as info:
        load_gavel(bad_steps)
    assert info.value.field == "total_steps" and "line 1" in str(info.value)
    bad_arrival = tmp_path / "arrival.trace"
    bad_arrival.write_text("A3C\tcmd\t-n\t1\t100\t-3\t1\n")
    with pytest.raises(DuettoInputError) as info:
        load_gavel(bad_arrival)
    assert info.value.field == "arrival_time"
    unknown = tmp_path / "unknown.trace"
    unknown.write_text("GPT-9\tcmd\t-n\t1\t100\t0\t1\n")
    with pytest.raises(DuettoInputError, match="no measured throughput for job type 'GPT-9'"):
        load_gavel(unknown)
    too_big = tmp_path / "big.trace"
    too_big.write_text("A3C\tcmd\t-n\t1\t100\t0\t1\nA3C\tcmd\t-n\t1\t100\t0\t128\n")
    with pytest.raises(InfeasibleInstanceError) as info:
        load_gavel(too_big)
    assert "job 'j1'" in str(info.value) and "line 2" in str(info.value)


# --- Shockwave ------------------------------------------------------------------------------------


def test_shockwave_traces_load() -> None:
    folder = DATA / "shockwave" / "traces"
    small = load_shockwave(next(folder.glob("120_*.trace")))
    large = load_shockwave(next(folder.glob("900_*.trace")))
    assert (len(small.jobs), len(large.jobs)) == (120, 900)
    assert small.cluster.num_gpus == 32
    # 120 trace line 1: LM (batch size 10), 134583 steps, duration 1418 s, arrival 0
    assert small.isolated_duration("j0") == pytest.approx(1418.0)
    assert small.job("j0").batch_size == 10
    # line 2: ResNet-18 (batch size 32), duration 3338 s, arrival 55 s
    assert small.isolated_duration("j1") == pytest.approx(3338.0)
    assert small.job("j1").arrival == 55.0
    # in the 120-job trace the duration field is total_steps / throughput
    steps = load_shockwave(next(folder.glob("120_*.trace")), duration_from="steps")
    assert steps.isolated_duration("j0") == pytest.approx(134583 / 94.91094148)
    assert steps.isolated_duration("j0") == pytest.approx(1418.0, rel=1e-3)
    # 900 trace line 1: ResNet-50 (batch size 64), 10964 steps, duration 2116 s (batch adaptation)
    assert large.isolated_duration("j0") == pytest.approx(2116.0)
    by_steps = load_shockwave(next(folder.glob("900_*.trace")), duration_from="steps", limit=5)
    assert by_steps.isolated_duration("j0") == pytest.approx(10964 / 3.10803185)
    assert isinstance(large.interference, TableInterference)
    assert large.metadata["modes"] == ["accordion", "gns", "static"]


def test_shockwave_needs_twelve_fields(tmp_path: Path) -> None:
    trace = tmp_path / "seven.trace"
    trace.write_text("A3C\tcmd\t-n\t1\t100\t0\t1\n")
    with pytest.raises(DuettoInputError, match="expected one of 12"):
        load_shockwave(trace)


# --- Pollux ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("folder", "count"), [("workloads", 160), ("workloads-0.5", 80), ("workloads-1.5", 240)])
def test_pollux_workloads_load(folder: str, count: int) -> None:
    files = sorted((DATA / "pollux" / folder).glob("workload-*.csv"))
    assert len(files) == 8
    for file in files:
        inst = load_pollux(file)
        assert len(inst.jobs) == count
        assert inst.cluster.num_gpus == 64
        assert all(inst.isolated_duration(job) > 0 for job in inst.jobs)


def test_pollux_known_rows() -> None:
    inst = load_pollux(DATA / "pollux" / "workloads-1.5" / "workload-1.csv")
    ncf = inst.job("ncf-0")  # ncf-0,29,ncf,1,32768
    assert (ncf.arrival, ncf.num_gpus, ncf.batch_size) == (29.0, 1, 32768)
    cifar = inst.job("cifar10-1")  # cifar10-1,107,cifar10,6,2048 -> ceil(2048 / 6) per GPU
    assert (cifar.num_gpus, cifar.batch_size) == (6, 342)
    assert cifar.profile == "cifar10-r6"
    # the isolated duration follows the fitted profile exactly
    fit = fit_pollux_application(DATA / "pollux" / "profiles" / "cifar10")
    t_iter = inst.iteration_time(cifar)
    assert t_iter == pytest.approx(fit.step_time(342, 6, inter_node=True))  # 6 GPUs span two 4-GPU nodes
    assert inst.isolated_duration(cifar) == pytest.approx(cifar.iterations * t_iter)
    assert cifar.iterations == round(fit.iterations(2048))


def test_pollux_bert_needs_accumulation() -> None:
    inst = load_pollux(DATA / "pollux" / "workloads" / "workload-1.csv")
    bert = next(job for job in inst.jobs if job.profile.startswith("bert"))
    # batch 384 over r GPUs gives a local batch far above the 12 samples bert fits per GPU
    assert bert.batch_size == -(-384 // bert.num_gpus)
    modes = inst.modes(bert.id)
    assert modes and all(mode.sub_batch <= 12 for mode in modes)
    assert min(mode.steps for mode in modes) > 1
    no_memory = load_pollux(DATA / "pollux" / "workloads" / "workload-1.csv", memory="none", limit=40)
    assert all(no_memory.modes(job.id)[0].steps == 1 for job in no_memory.jobs)


def test_pollux_iterations_rule() -> None:
    bert = fit_pollux_application(DATA / "pollux" / "profiles" / "bert")
    # at the initial (smallest validated) batch the gain is 1: iterations = progress = the
    # validation file's own iteration count after the last epoch
    assert bert.epochs == 2 and bert.init_batch_size == 12
    assert bert.iterations(12) == pytest.approx(14774.0)
    # larger batches need fewer iterations, but more samples
    assert bert.iterations(384) < bert.iterations(96) < bert.iterations(12)
    assert 384 * bert.iterations(384) > 12 * bert.iterations(12)
    assert {fit_pollux_application(DATA / "pollux" / "profiles" / a).epochs for a in ("cifar10", "ncf")} == {100, 10}


def test_pollux_fit_quality() -> None:
    report = pollux_fit_report(DATA / "pollux" / "profiles")
    assert [row["application"] for row in report] == ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"]
    for row in report:
        assert float(row["single_rms_log_error"]) < 0.2, row
        assert float(row["multi_rms_log_error"]) < 0.15, row
        assert 1.0 <= float(row["delta"]) <= 10.0
    bert = fit_pollux_application(DATA / "pollux" / "profiles" / "bert")
    # placements.csv: 1,4,0.45532354712486267 (one GPU, local batch 4)
    assert bert.step_time(4, 1, inter_node=False) == pytest.approx(0.45532354712486267, rel=0.03)


def test_per_gpu_batch_rounding() -> None:
    assert per_gpu_batch(2048, 6, 1024) == 342
    assert per_gpu_batch(384, 6, 12) == 64  # s = 8 gives sub-batch 8
    assert per_gpu_batch(100, 1, 12) == 112  # s = 16: ceil(100 / 16) = 7 -> 7 * 16


def test_pollux_bad_inputs(tmp_path: Path) -> None:
    profiles = DATA / "pollux" / "profiles"
    bad_app = tmp_path / "w.csv"
    bad_app.write_text("name,time,application,num_replicas,batch_size\na,0,ncf,1,32768\nb,5,gpt,2,64\n")
    with pytest.raises(DuettoInputError) as info:
        load_pollux(bad_app, profiles_dir=profiles)
    assert "unknown application 'gpt'" in str(info.value) and "row 2" in str(info.value)
    bad_replicas = tmp_path / "r.csv"
    bad_replicas.write_text("name,time,application,num_replicas,batch_size\na,0,ncf,0,32768\n")
    with pytest.raises(DuettoInputError) as info:
        load_pollux(bad_replicas, profiles_dir=profiles)
    assert info.value.field == "num_replicas" and "row 1" in str(info.value)


# --- dispatcher and generic CSV errors ---------------------------------------------------------------


def test_load_trace_dispatch() -> None:
    assert set(TRACE_KINDS) == {"muri", "tiresias", "gavel", "shockwave", "pollux"}
    inst = load_trace("tiresias", DATA / "tiresias" / "60_job.csv", limit=5)
    assert len(inst.jobs) == 5
    with pytest.raises(DuettoInputError, match="unknown trace kind 'philly'"):
        load_trace("philly", DATA / "tiresias" / "60_job.csv")
    with pytest.raises(DuettoInputError, match="unexpected keyword"):
        load_trace("tiresias", DATA / "tiresias" / "60_job.csv", worker_type="v100")
    with pytest.raises(DuettoInputError, match="limit"):
        load_trace("muri", DATA / "muri" / "trace1.csv", limit=0)


def _muri(tmp_path: Path, *rows: str) -> Path:
    file = tmp_path / "t.csv"
    file.write_text("\n".join([MURI_HEADER, *rows]) + "\n")
    return file


GOOD = "0,1,0,100,vgg16,16,50000,0,500,100,400,0,0"


def test_csv_errors_name_file_row_and_column(tmp_path: Path) -> None:
    # missing file
    with pytest.raises(DuettoInputError, match="file not found"):
        load_muri(tmp_path / "nope.csv")
    # ragged row
    ragged = _muri(tmp_path, GOOD, "1,1,0,100,vgg16,16,50000")
    with pytest.raises(DuettoInputError) as info:
        load_muri(ragged)
    assert "line 3" in str(info.value) and "7 fields" in str(info.value)
    # missing column
    missing = tmp_path / "m.csv"
    missing.write_text("job_id,num_gpu,submit_time\n0,1,0\n")
    with pytest.raises(DuettoInputError) as info:
        load_muri(missing)
    assert "missing column(s)" in str(info.value) and "iterations" in str(info.value)
    # non-numeric duration in the second data row
    text = _muri(tmp_path, GOOD, "1,1,0,100,vgg16,16,soon,0,500,100,400,0,0")
    with pytest.raises(DuettoInputError) as info:
        load_muri(text)
    assert (info.value.field, "row 2" in str(info.value), "t.csv" in str(info.value)) == ("duration", True, True)
    # zero and negative durations
    for value in ("0", "-5"):
        bad = _muri(tmp_path, GOOD, GOOD, f"2,1,0,100,vgg16,16,{value},0,500,100,400,0,0")
        with pytest.raises(DuettoInputError) as info:
            load_muri(bad)
        assert info.value.field == "duration" and "row 3" in str(info.value)
    # fractional GPU count
    frac = _muri(tmp_path, "0,1.5,0,100,vgg16,16,50000,0,500,100,400,0,0")
    with pytest.raises(DuettoInputError) as info:
        load_muri(frac)
    assert info.value.field == "num_gpu"
    # duplicate ids
    dup = _muri(tmp_path, GOOD, GOOD)
    with pytest.raises(DuettoInputError, match="duplicate job id '0'"):
        load_muri(dup)
    # empty file
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(DuettoInputError, match="empty"):
        load_tiresias(empty)
    # a job larger than the default cluster (no cluster spec beside the file: 8 x 8)
    big = _muri(tmp_path, GOOD, "7,128,0,100,vgg16,16,50000,0,500,100,400,0,0")
    with pytest.raises(InfeasibleInstanceError) as info:
        load_muri(big)
    assert "job '7'" in str(info.value) and "row 2" in str(info.value)


def test_small_muri_file_in_seconds(tmp_path: Path) -> None:
    inst = load_muri(_muri(tmp_path, GOOD, "1,2,2500,10,bert,4,3000,0,300,0.5,200,90,1"))
    assert (inst.cluster.nodes, inst.cluster.gpus_per_node) == (8, 8)
    assert inst.isolated_duration("0") == pytest.approx(50.0)
    assert inst.job("1").arrival == pytest.approx(2.5)
    assert inst.isolated_duration("1") == pytest.approx(3.0)
    assert inst.profile_of("1").stage_times == pytest.approx((0.0005, 0.2, 0.09))


def test_tiresias_bad_iterations(tmp_path: Path) -> None:
    file = tmp_path / "t.csv"
    file.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,0,vgg19,164,30\n")
    with pytest.raises(DuettoInputError) as info:
        load_tiresias(file)
    assert info.value.field == "iterations" and "row 1" in str(info.value)


def test_limit_keeps_earliest_arrivals_and_file_rows(tmp_path: Path) -> None:
    late = "0,1,500000,100,vgg16,16,50000,0,500,100,400,0,0"
    first = "1,1,0,100,vgg16,16,50000,0,500,100,400,0,0"
    second = "2,1,100000,100,vgg16,16,50000,0,500,100,400,0,0"
    inst = load_muri(_muri(tmp_path, late, first, second), limit=2)
    assert [job.id for job in inst.jobs] == ["1", "2"]  # the two earliest, in file order
    broken = "2,1,100000,100,vgg16,16,-1,0,500,100,400,0,0"
    with pytest.raises(DuettoInputError) as info:
        load_muri(_muri(tmp_path, late, first, broken), limit=2)
    assert "row 3" in str(info.value)  # the file's row, not the position after filtering


def test_docs_examples_parse() -> None:
    """The JSON examples in docs/formats.md are valid and their stated numbers hold."""
    import re

    text = (Path(__file__).resolve().parent.parent / "docs" / "formats.md").read_text()
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, flags=re.S)]
    instance = io.instance_from_dict(blocks[0])
    schedule = io.schedule_from_dict(blocks[1])
    assert instance.iteration_time("a") == pytest.approx(0.1529, abs=5e-5)
    assert instance.isolated_duration("a") == pytest.approx(152.9, abs=0.05)
    assert instance.isolated_duration("b") == pytest.approx(70.0)
    assert instance.modes("a")[0].memory_gib == pytest.approx(16.8)
    assert instance.ratio("b", "a") is None and instance.ratio("a", "b") == 1.3
    assert [plan.start for plan in schedule.plans] == [0.0, 153.0]
    from formulation.validator import validate

    report = validate(instance, schedule)
    assert report.ok, report.violations
    assert report.completion["b"] == pytest.approx(223.0)
