"""Issue 15 item 2: every trace loader checks its header against its format (naming the format that
matches) and refuses absurd values with their row unless explicitly allowed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from duetto.cli import app
from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir
from formulation.traces import load_trace
from formulation.traces.common import MAX_PLAUSIBLE_SECONDS, detect_kind

DATA = shared_data_dir()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")
runner = CliRunner()
HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"


@needs_data
def test_muri_trace_read_as_tiresias_is_refused_naming_muri(tmp_path: Path) -> None:
    # was: exit 0 and a 4,257,415,000 s job (milliseconds read as seconds)
    out = tmp_path / "x.json"
    result = runner.invoke(app, ["import", "tiresias", str(DATA / "muri" / "trace2.csv"), "-o", str(out)])
    assert result.exit_code == 2
    assert "this is a muri trace" in result.output
    assert not out.exists()


@needs_data
@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("muri/trace2.csv", "muri"),
        ("tiresias/60_job.csv", "tiresias"),
        ("pollux/workloads/workload-1.csv", "pollux"),
        ("gavel/msr_seed0/0e4a51.trace", "gavel"),
    ],
)
def test_each_shared_format_is_recognised_and_others_refuse_it(path: str, kind: str) -> None:
    file = DATA / path
    if not file.is_file():
        pytest.skip(f"{path} not in the shared data")
    assert detect_kind(file) == kind
    for other in ("muri", "tiresias", "pollux"):
        if other != kind:
            with pytest.raises(DuettoInputError, match=f"this is a {kind} trace"):
                load_trace(other, file)


def test_a_job_longer_than_a_year_is_refused_with_its_row_unless_allowed(tmp_path: Path) -> None:
    trace = tmp_path / "ms.csv"
    # row 2: a duration in milliseconds in a seconds format (about 49 years)
    trace.write_text(HEADER + "0,1,0,100,vgg19,164,30\n1,1,30,100,vgg11,1545000000,23\n")
    with pytest.raises(DuettoInputError, match=r"row 2.*job '1' runs 1,545,000,000 s alone"):
        load_trace("tiresias", trace, nodes=1, gpus_per_node=4)
    result = runner.invoke(app, ["import", "tiresias", str(trace), "-o", str(tmp_path / "a.json")])
    assert result.exit_code == 2 and "--allow-implausible" in result.output
    kept = load_trace("tiresias", trace, nodes=1, gpus_per_node=4, allow_implausible=True)
    assert kept.isolated_duration(kept.job("1")) > MAX_PLAUSIBLE_SECONDS
    result = runner.invoke(
        app, ["import", "tiresias", str(trace), "--allow-implausible", "-o", str(tmp_path / "b.json"), "--json"]
    )
    assert result.exit_code == 0, result.output


def test_a_negative_time_is_refused_with_its_row(tmp_path: Path) -> None:
    trace = tmp_path / "neg.csv"
    trace.write_text(HEADER + "0,1,0,100,vgg19,164,30\n1,1,-5,100,vgg11,100,23\n")
    with pytest.raises(DuettoInputError, match="row 2"):
        load_trace("tiresias", trace, nodes=1, gpus_per_node=4)
