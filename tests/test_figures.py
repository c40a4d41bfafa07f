"""Figures that explain themselves (benchmarks/plots.py), checked on the matplotlib objects: the Gantt
chart's legend, its labels (each fits its bar, or the bar gets a number keyed under the chart), no
rows for unused GPUs on a large cluster, and whole-number ticks on job-count axes."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import duetto
from benchmarks.plots import (
    GANTT_MAX_EMPTY_ROWS,
    gantt,
    gantt_figure,
    gap_vs_n_figure,
    scaling_loglog_figure,
)


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


def _ytick_texts(fig: Any) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_yticklabels()]


def _legend_texts(fig: Any) -> list[str]:
    legend = fig.axes[0].get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend is not None else []


def test_a_large_cluster_draws_only_the_gpus_it_used() -> None:
    instance = duetto.generate_instance(12, nodes=16, gpus_per_node=8, seed=1)  # 128 GPUs, few used
    run = duetto.simulate(instance, "sjf-bsbf")
    used = sorted({item.gpu for item in run.report.occupancy})
    unused = 128 - len(used)
    assert unused > GANTT_MAX_EMPTY_ROWS
    fig = gantt_figure(instance, run.report)
    assert _ytick_texts(fig) == [f"{g // 8}:{g % 8}" for g in used]
    assert f"{unused} of 128 GPUs never used (not drawn)" in fig.axes[0].get_title(loc="left")
    assert fig.get_size_inches()[1] == pytest.approx(0.28 * len(used) + 1.6)  # was 0.28 * 128 + 1.2
    every = gantt_figure(instance, run.report, max_empty_rows=128)  # the threshold keeps them all
    assert len(_ytick_texts(every)) == 128 and "never used" not in every.axes[0].get_title(loc="left")


def test_a_few_idle_gpus_keep_their_rows() -> None:
    instance = duetto.generate_instance(2, nodes=1, gpus_per_node=8, seed=0)
    run = duetto.simulate(instance, "fifo")
    assert 0 < 8 - len({item.gpu for item in run.report.occupancy}) <= GANTT_MAX_EMPTY_ROWS
    assert _ytick_texts(gantt_figure(instance, run.report)) == [f"0:{g}" for g in range(8)]


def test_the_legend_explains_the_hatching_of_shared_gpus() -> None:
    instance = duetto.generate_instance(8, nodes=1, gpus_per_node=4, seed=3)
    shared = duetto.simulate(instance, "sjf-bsbf", slot=30)
    assert any(len(item.jobs) == 2 for item in shared.report.occupancy)
    fig = gantt_figure(instance, shared.report)
    assert _legend_texts(fig) == ["one job on the GPU", "GPU shared by two jobs"]
    handles = fig.axes[0].get_legend().legend_handles
    assert handles[1].get_hatch() == "//" and not handles[0].get_hatch()
    hatched = [c for c in fig.axes[0].collections if c.get_hatch() == "//"]
    assert len(hatched) == 2 * sum(len(item.jobs) == 2 for item in shared.report.occupancy)
    alone = duetto.simulate(instance, "fifo")  # exclusive: nothing hatched, nothing to explain about it
    assert not any(len(item.jobs) == 2 for item in alone.report.occupancy)
    assert _legend_texts(gantt_figure(instance, alone.report)) == ["one job on the GPU"]


def test_every_label_fits_its_bar_and_numbers_are_keyed(tmp_path: Any) -> None:
    # long and short jobs on one time axis: wide bars get ids, narrow ones numbers, the narrowest nothing
    base = duetto.generate_instance(30, nodes=1, gpus_per_node=4, seed=2, duration_range=(30.0, 30000.0))
    instance = base.replace(jobs=tuple(dataclasses.replace(job, id=f"train-{job.id}") for job in base.jobs))
    run = duetto.simulate(instance, "sjf-bsbf")
    fig = gantt_figure(instance, run.report)
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    number_of = {job.id: str(i + 1) for i, job in enumerate(instance.jobs)}
    labels = [t for t in ax.texts if (t.get_gid() or "").startswith("label:")]
    by_kind = {"id": 0, "number": 0}
    for text in labels:
        job_id = text.get_gid()[len("label:") :]
        assert text.get_text() in (job_id, number_of[job_id])
        by_kind["id" if text.get_text() == job_id else "number"] += 1
        x, _ = text.get_position()
        bars = [o for o in run.report.occupancy if job_id in o.jobs and o.start <= x <= o.end]
        left, right = (ax.transData.transform((t, 0))[0] for t in (bars[0].start, bars[0].end))
        assert text.get_window_extent(renderer).width <= right - left, (text.get_text(), right - left)
    assert by_kind["id"] > 0 and by_kind["number"] > 0
    key = [t for t in ax.texts if t.get_gid() == "job-key"]
    assert len(key) == 1
    pairs = dict(re.findall(r"(\d+) (train-j\d+)", key[0].get_text()))
    numbered = {t.get_gid()[len("label:") :] for t in labels if t.get_text() != t.get_gid()[len("label:") :]}
    assert set(pairs.values()) == numbered and all(number_of[job] == n for n, job in pairs.items())
    unlabelled = {o.jobs[0] for o in run.report.occupancy} - {t.get_gid()[len("label:") :] for t in labels}
    assert unlabelled  # some bars are too narrow even for a number: they stay bare rather than overflow
    assert gantt(instance, run.report, tmp_path / "g.png").stat().st_size > 10_000  # and it saves


def _gap_frame(sizes: list[int]) -> pd.DataFrame:
    rows = [
        {"method": method, "n": n, "seed": seed, "gap": 0.01 * seed + 0.001 * n, "gap_kind": "optimum"}
        for method in ("fifo", "sjf-bsbf")
        for n in sizes
        for seed in range(3)
    ]
    return pd.DataFrame(rows)


def test_job_counts_are_whole_numbers_on_the_axes() -> None:
    fig = gap_vs_n_figure(_gap_frame([4, 6, 8]))
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [4, 6, 8]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "6", "8"]
    sizes = [10, 30, 100, 300, 1000, 3000, 10000]
    timings = pd.DataFrame([{"method": "fifo", "n": n, "seconds": 1e-4 * n} for n in sizes])
    fig = scaling_loglog_figure(timings, {"fifo": (-9.2, 1.0)})
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == sizes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "30", "100", "300", "1,000", "3,000", "10,000"]
    assert list(ax.xaxis.get_minorticklocs()) == []
    # many sizes: matplotlib places the ticks, each printed as a whole number
    many = list(range(2, 60, 3))
    fig = gap_vs_n_figure(_gap_frame(many))
    ax = fig.axes[0]
    fig.canvas.draw()
    low, high = ax.get_xlim()
    shown = [(tick, label.get_text()) for tick, label in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)]
    visible = [(tick, text) for tick, text in shown if low <= tick <= high]
    assert len(visible) >= 3 and all(float(tick).is_integer() and text == f"{tick:,.0f}" for tick, text in visible)
