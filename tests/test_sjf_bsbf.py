"""SJF-BSBF: Theorem 1 against a brute-force sweep of the insertion time κ, Algorithm 2's sub-batch
search, and Algorithm 1's decisions (decline a pair that hurts, accept one that pays) on small
instances whose numbers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from formulation.cluster import Cluster
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference, TableInterference
from formulation.speed import Profile
from formulation.validator import validate
from heuristics import simulate
from heuristics.lookahead import pair_verdict
from heuristics.sjf_bsbf import ModeOption, best_sub_batch, pair_completion_times, theorem1_share

# --- Theorem 1 ----------------------------------------------------------------------------------------


def _sweep_min(t_a: float, i_a: float, xi_a: float, t_b: float, i_b: float, xi_b: float) -> float:
    """Smallest average pair JCT over a fine grid of insertion times κ in [0, t_A·i_A]."""
    alone_a = t_a * i_a
    kappas = np.concatenate([np.linspace(0.0, alone_a, 4001), [alone_a]])
    return min(0.5 * sum(pair_completion_times(t_a, i_a, xi_a, t_b, i_b, xi_b, float(k))) for k in kappas)


def test_theorem1_matches_brute_force_sweep_of_kappa() -> None:
    rng = np.random.default_rng(20240611)
    shares = 0
    for _ in range(300):
        t_a, t_b = rng.uniform(0.05, 2.0, size=2)
        i_a, i_b = rng.uniform(10, 5000, size=2)
        xi_a, xi_b = rng.uniform(1.0, 3.0, size=2)
        decision = theorem1_share(t_a, i_a, xi_a, t_b, i_b, xi_b)
        brute = _sweep_min(t_a, i_a, xi_a, t_b, i_b, xi_b)
        scale = t_a * i_a + t_b * i_b
        # No insertion time beats the better end point ...
        assert brute >= decision.avg_jct - 1e-9 * scale
        # ... and the better end point is reached by the sweep (κ = 0 and κ = t_A·i_A are on the grid).
        assert brute == pytest.approx(decision.avg_jct, rel=1e-12, abs=1e-9 * scale)
        assert decision.avg_jct == min(decision.overlap_avg, decision.sequential_avg)
        assert decision.share == (decision.overlap_avg < decision.sequential_avg)
        shares += decision.share
    assert 30 < shares < 270  # the sample covers both verdicts


def test_theorem1_closed_forms_of_the_paper() -> None:
    # Case 1 (Eq. 19): t̂_A·i_A >= t̂_B·i_B -> T̄ = t̂_B i_B + t_A i_A / 2 - t̂_B i_B / (2 ξ_A)
    t_a, i_a, xi_a, t_b, i_b, xi_b = 1.0, 1000.0, 1.3, 0.5, 400.0, 1.6
    hat_b = t_b * xi_b * i_b
    decision = theorem1_share(t_a, i_a, xi_a, t_b, i_b, xi_b)
    assert decision.overlap_avg == pytest.approx(hat_b + t_a * i_a / 2 - hat_b / (2 * xi_a))
    # Case 2 at κ = 0 (Eq. 23): T̄ = (1 - 1/(2 ξ_B)) t̂_A i_A + t_B i_B / 2
    t_a, i_a, xi_a, t_b, i_b, xi_b = 0.2, 500.0, 1.4, 1.0, 900.0, 1.2
    decision = theorem1_share(t_a, i_a, xi_a, t_b, i_b, xi_b)
    assert decision.overlap_avg == pytest.approx((1 - 1 / (2 * xi_b)) * t_a * xi_a * i_a + t_b * i_b / 2)
    # The sign test of the proof: share iff 2ξ_B + ξ_A - 2ξ_Aξ_B > 0 (case 2, B the longer job).
    assert decision.share == (2 * xi_b + xi_a - 2 * xi_a * xi_b > 0)
    assert decision.sequential_avg == pytest.approx(t_a * i_a + t_b * i_b / 2)


def test_theorem1_extremes() -> None:
    # No interference: overlapping is never worse, and strictly better here.
    assert theorem1_share(1.0, 100.0, 1.0, 1.0, 100.0, 1.0).share
    # Heavy interference: wait.
    heavy = theorem1_share(1.0, 100.0, 3.0, 1.0, 100.0, 3.0)
    assert not heavy.share
    assert heavy.avg_jct == pytest.approx(150.0)  # A at 100, B at 200


def test_theorem1_ties_wait_whatever_the_last_bits() -> None:
    # With ξ_A = ξ_B = 1.5 and A finishing first, overlapping and waiting tie exactly (Castor's Case 2:
    # the κ coefficient 2ξ_B + ξ_A − 2ξ_Aξ_B is 0, and the paper then waits). These are the numbers of a
    # tie in the Pollux replay on which a plain ``<`` shared, by rounding alone.
    t_a, i_a, t_b, i_b = 0.29515622594859403, 110.17823562190688, 0.25481808960297203, 2143.0
    exact = theorem1_share(t_a, i_a, 1.5, t_b, i_b, 1.5)
    assert exact.overlap_avg < exact.sequential_avg  # the rounding that used to decide it
    assert exact.overlap_avg == pytest.approx(exact.sequential_avg, rel=1e-14)
    assert not exact.share and exact.avg_jct == exact.sequential_avg
    # the same tie with inputs moved in the ninth digit (another CPU's BLAS fits) waits as well
    for factor in (1 - 1e-9, 1 + 1e-9):
        assert not theorem1_share(t_a * factor, i_a, 1.5, t_b, i_b / factor, 1.5).share
        assert not pair_verdict(t_a * factor, i_a, 1.5, t_b, i_b / factor, 1.5, t_b)[0]
    # a real gain is not a tie: B shorter than what A has left shares
    assert theorem1_share(1.0, 100.0, 1.5, 1.0, 50.0, 1.5).share
    assert pair_verdict(1.0, 100.0, 1.5, 1.0, 50.0, 1.5, 1.0)[0]


# --- Algorithm 2 --------------------------------------------------------------------------------------


def _options(batch: int, memory_per_sample: float, base: float = 2.0) -> list[ModeOption]:
    options = []
    steps = 1
    while steps <= batch:
        b = batch // steps
        # larger sub-batches are faster per iteration (accumulation costs per micro-step overhead)
        options.append(ModeOption(steps, b, 0.01 * steps + 0.001 * batch, base + memory_per_sample * b))
        steps *= 2
    return options


PAIR = {"t_a": 1.0, "i_a": 1000.0, "xi_a": 1.1, "xi_b": 1.1, "i_b": 500.0}


def test_algorithm2_tries_every_size_and_keeps_the_best_that_fits() -> None:
    options = _options(64, 0.5)  # memory: b=64 -> 34 GiB, 32 -> 18, 16 -> 10, ...
    t_alone = options[0].iteration_time
    # The printed algorithm returns inside its loop, i.e. after the first size (64), which does not fit
    # in 12 GiB: the intended search goes on down to 16 (10 GiB), the largest that fits.
    choice = best_sub_batch(64, options, 12.0, t_b_alone=t_alone, **PAIR)
    assert choice is not None
    assert (choice.sub_batch, choice.steps) == (16, 4)
    assert choice.share
    # With room for everything, the full batch (fastest) wins.
    roomy = best_sub_batch(64, options, 40.0, t_b_alone=t_alone, **PAIR)
    assert roomy is not None and roomy.sub_batch == 64
    # Nothing fits: no configuration.
    assert best_sub_batch(64, options, 1.0, t_b_alone=t_alone, **PAIR) is None


def test_algorithm2_ties_go_to_the_smaller_sub_batch_as_printed() -> None:
    flat = [ModeOption(s, 32 // s, 0.1, 1.0) for s in (1, 2, 4)]  # same speed at every size
    choice = best_sub_batch(32, flat, 10.0, t_b_alone=0.1, **PAIR)
    assert choice is not None and choice.sub_batch == 8  # `t_share <= t̄` keeps the last tie


def test_algorithm2_reports_waiting_when_sharing_never_pays() -> None:
    options = _options(64, 0.1)
    choice = best_sub_batch(
        64, options, 40.0, t_a=1.0, i_a=1000.0, xi_a=3.0, xi_b=3.0, i_b=20000.0, t_b_alone=options[0].iteration_time
    )
    assert choice is not None and not choice.share


# --- Algorithm 1 in the simulator ---------------------------------------------------------------------


def _pair_instance(xi: float, *, memory_per_sample: float = 0.05, memory_base: float = 4.0) -> Instance:
    """One GPU, C = 2. A (1000 s alone) arrives at 0, B (400 s alone) at 100."""
    profiles = {
        "pa": Profile(
            "pa",
            compute_alpha=0.0,
            compute_beta=0.01,
            memory_base_gib=memory_base,
            memory_per_sample_gib=memory_per_sample,
        ),
        "pb": Profile(
            "pb",
            compute_alpha=0.0,
            compute_beta=0.01,
            memory_base_gib=memory_base,
            memory_per_sample_gib=memory_per_sample,
        ),
    }
    jobs = (
        Job("A", 0.0, 1, 1000.0, 100, "pa"),  # t_iter = 1.0 s -> 1000 s
        Job("B", 100.0, 1, 400.0, 100, "pb"),  # 400 s
    )
    return Instance(Cluster(1, 1, 32.0, 2), jobs, profiles, ConstantInterference(xi), name=f"pair-xi{xi}")


def test_sjf_bsbf_declines_a_pair_whose_interference_makes_sharing_worse() -> None:
    instance = _pair_instance(xi=2.5)
    # At t=100 A has 900 s left. Overlap: B done at 1000 (400·2.5), A then has 900-1000/2.5 = 500 s
    # left -> 1500; mean 1250. Sequential: A at 900, B at 1300 -> mean 1100. Wait.
    verdict = theorem1_share(1.0, 900.0, 2.5, 1.0, 400.0, 2.5)
    assert not verdict.share and verdict.sequential_avg == pytest.approx(1100.0)
    result = simulate(instance, "sjf-bsbf")
    assert result.report.ok and not result.mismatches
    plans = result.schedule.plan_index
    assert plans["B"].start == pytest.approx(1000.0)  # started when A finished
    assert result.completion == pytest.approx({"A": 1000.0, "B": 1400.0})
    assert result.metrics is not None and result.metrics["shared_gpu_seconds"] == 0
    # First-fit sharing shares anyway, and it costs: both finish later on average.
    ffs = simulate(instance, "sjf-ffs")
    assert ffs.report.ok
    assert ffs.completion == pytest.approx({"A": 1600.0, "B": 1100.0})
    assert ffs.avg_jct > result.avg_jct


def test_sjf_bsbf_accepts_a_pair_where_sharing_pays() -> None:
    instance = _pair_instance(xi=1.25)
    # Overlap from t=100: B needs 400·1.25 = 500 s -> done at 600; A did 500/1.25 = 400 s of its 900
    # -> 500 s alone -> 1100. Mean of (A, B) from t=100: (1000 + 500)/2 = 750 < sequential 1100.
    verdict = theorem1_share(1.0, 900.0, 1.25, 1.0, 400.0, 1.25)
    assert verdict.share and verdict.overlap_avg == pytest.approx(750.0)
    result = simulate(instance, "sjf-bsbf")
    assert result.report.ok and not result.mismatches
    assert result.schedule.plan_index["B"].segments[0].gpus == (0,)
    assert result.schedule.plan_index["B"].start == pytest.approx(100.0)
    assert result.completion == pytest.approx({"A": 1100.0, "B": 600.0})


def test_sjf_bsbf_shrinks_the_sub_batch_to_fit_memory() -> None:
    # Full batch (100 samples) needs 2 + 0.2·100 = 22 GiB: two jobs cannot share at full batch (44 > 32).
    instance = _pair_instance(xi=1.1, memory_per_sample=0.2, memory_base=2.0)
    result = simulate(instance, "sjf-bsbf")
    assert result.report.ok and not result.mismatches
    segment = result.schedule.plan_index["B"].segments[0]
    assert segment.start == pytest.approx(100.0)
    # B runs with 4 accumulation steps (sub-batch 25: 2 + 5 = 7 GiB next to A's 22 GiB); 2 steps (12 GiB)
    # would not fit. Batch 100 = 4·25; the options are 1, 2, 4 steps (100/8 is not an integer).
    assert segment.steps == 4
    assert result.completion["B"] == pytest.approx(100.0 + 400.0 * 1.1)


def test_sharing_prefers_occupied_gpus_and_completes_with_idle_ones() -> None:
    """Algorithm 1: with too few idle GPUs, shared GPUs are taken first; idle ones only complete the gang."""
    profile = Profile("p", compute_beta=0.01, memory_base_gib=2.0, memory_per_sample_gib=0.01)
    jobs = (
        Job("A", 0.0, 1, 100000.0, 100, "p"),  # long, on one GPU
        Job("B", 10.0, 2, 1000.0, 100, "p"),  # needs 2 GPUs, only 1 idle
        Job("C", 20.0, 1, 1000.0, 100, "p"),
    )
    instance = Instance(Cluster(1, 2, 32.0, 2), jobs, {"p": profile}, ConstantInterference(1.05))
    result = simulate(instance, "sjf-bsbf")
    assert result.report.ok and not result.mismatches
    b = result.schedule.plan_index["B"].segments[0]
    assert b.start == pytest.approx(10.0) and sorted(b.gpus) == [0, 1]


def test_gpus_with_a_forbidden_partner_are_not_shared() -> None:
    profiles = {
        "pa": Profile("pa", compute_beta=0.01, memory_base_gib=2.0),
        "pb": Profile("pb", compute_beta=0.01, memory_base_gib=2.0),
    }
    jobs = (Job("A", 0.0, 1, 1000.0, 100, "pa"), Job("B", 10.0, 1, 100.0, 100, "pb"))
    table = TableInterference({("pa", "pb"): None, ("pb", "pa"): None}, default=1.0)
    instance = Instance(Cluster(1, 1, 32.0, 2), jobs, profiles, table)
    for policy in ("sjf-bsbf", "sjf-ffs"):
        result = simulate(instance, policy)
        assert result.report.ok
        assert result.schedule.plan_index["B"].start == pytest.approx(1000.0)


def test_sjf_bsbf_schedules_pass_the_validator_on_random_instances() -> None:
    from formulation.generator import generate_instance

    for seed in range(4):
        instance = generate_instance(40, 2, 4, seed, arrivals="poisson", load=2.0, xi_range=(1.0, 2.5))
        for slot in (None, 60.0):
            result = simulate(instance, "sjf-bsbf", slot=slot)
            report = validate(result.instance, result.schedule)
            assert report.ok, report.violations[:3]
            assert not result.mismatches
