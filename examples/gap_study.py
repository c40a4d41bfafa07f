"""A small optimality-gap study from Python: how far are the scheduling policies from the optimum?

``duetto.gap_study`` runs the same study as ``duetto gap``: for every instance of the seeded random
family, the exact oracle (CP-SAT) proves the optimal total JCT, every policy runs in the slotted
simulator with the same slot length, and the validator measures every schedule. The result is a pandas
DataFrame with one row per instance × method.

Run it::

    python examples/gap_study.py                 # 2 sizes x 2 seeds, about half a minute
    python examples/gap_study.py --seeds 5 --out results/example-gap   # keep the files, resumable
"""

from __future__ import annotations

import argparse

import pandas as pd

import duetto

POLICIES = ("fifo", "sjf", "tiresias", "sjf-bsbf")


def gap_table(sizes: tuple[int, ...] = (4, 6), seeds: int = 2, out: str | None = None) -> pd.DataFrame:
    """Run the study and return its rows (one per instance × method)."""
    return duetto.gap_study(
        sizes=sizes,
        cluster="1x4",  # one node with four GPUs
        seeds=seeds,  # instances per size: seeds 0..seeds-1
        arrivals="zero",  # every job waits at time 0 (a batch); "poisson" for online arrivals
        policies=POLICIES,
        solvers="cpsat",
        time_limit=30,  # seconds per exact solve; these sizes are proven in well under a second
        out=out,
    )


def main() -> pd.DataFrame:
    parser = argparse.ArgumentParser(description="a small optimality-gap study")
    parser.add_argument("--seeds", type=int, default=2, help="instances per size")
    parser.add_argument("--out", default=None, help="folder to keep the rows, tables and figures in")
    args = parser.parse_args()

    rows = gap_table(seeds=args.seeds, out=args.out)
    proven = rows[rows["gap_kind"] == "optimum"]  # instances whose optimum the oracle proved
    policies = proven[proven["method_kind"] == "policy"]
    table = (
        policies.groupby("method")["gap"]
        .agg(median="median", worst="max", instances="count")
        .sort_values("median")
        .rename_axis("policy")
    )
    print(f"{rows['instance'].nunique()} instances, {int(rows['validated'].sum())}/{len(rows)} schedules valid")
    print("gap of total JCT to the proven optimum (0.05 = 5 % worse):")
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    return rows


if __name__ == "__main__":
    main()
