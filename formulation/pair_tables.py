"""Measured pair tables: interference ratios ξ read from a CSV file (``--interference table:FILE``).

Three layouts, told apart by the header (extra columns are ignored):

* **ratio**: ``victim,other,ratio`` — ξ of ``victim`` running next to ``other``; an empty cell,
  ``none`` or ``null`` means the pair may not share a GPU.
* **throughputs**: ``victim,other,isolated,colocated`` (or ``isolated_throughput,
  colocated_throughput``) — the victim's throughput alone and next to ``other``, in any one unit;
  ξ = isolated / colocated (Castor Eq. 4-5; Gavel's ``slowdown``); a co-located throughput of 0
  means the pair does not fit together (Gavel's convention).
* **lucid**: Lucid's ``colocate_info.csv`` (``model1,batchsize1,amp1,gpu_num1,speed1,model2,...,
  speed2``; S-Lab-System-Group/Lucid, ``simulation/data/colocate_info.csv``): ``speed`` is a job's
  co-located throughput normalised by its isolated one, so one row gives both directions,
  ξ(1 | 2) = 1 / speed1 and ξ(2 | 1) = 1 / speed2. A job is named ``<model>-b<batch size>``, with
  ``-g<GPUs>`` when it used more than one GPU and ``-amp`` for mixed precision (``amp = 1``).

Rules (docs/formats.md, "Measured pair tables"):

* **Ratios below 1** (co-location measured faster than alone: measurement noise, common in Lucid's
  table) are **clipped to 1** — sharing never speeds a job up in duetto's model (SPEC: ξ ≥ 1) — and
  reported in one :class:`~formulation.errors.DuettoWarning` naming the file, the count and the first
  pairs with their rows. A ratio that is not a number, not finite or ≤ 0 is an error naming the row.
* A pair listed more than once gets the mean of its ratios (repeated measurements); if any listing
  forbids it, it stays forbidden.
* Names match an instance's profiles case-insensitively, exactly or as the longest table name that
  is a prefix of the profile name ending at a non-alphanumeric character: ``cifar10`` matches the
  Pollux profile ``cifar10-r4``, ``resnet18-b32`` the Muri profile ``resnet18-b32-g1``, a Gavel job
  type its multi-GPU profile ``<job type> x4``. Pairs the table does not give keep the instance's
  current ratio (the loader's model). A table that names no pair of the instance's profiles is an
  error (it would change nothing).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import cast

from formulation.errors import DuettoInputError, DuettoWarning
from formulation.instance import Instance
from formulation.interference import TableInterference
from formulation.traces.common import PathLike, read_table, row_source

_FORBIDDEN = ("", "none", "null")
_SHOWN = 3  # pairs named in the clipping warning


@dataclass(frozen=True)
class PairTable:
    """Ratios read from a pair-table file.

    Attributes
    ----------
    source
        The file.
    layout
        ``ratio``, ``throughputs`` or ``lucid``.
    pairs
        ``(victim name, other name) → ξ`` (``None``: may not share), ξ ≥ 1 after clipping.
    clipped
        ``"row N (victim next to other: ξ)"`` for every measured ratio below 1 that was clipped to 1.
    """

    source: str
    layout: str
    pairs: Mapping[tuple[str, str], float | None]
    clipped: tuple[str, ...] = ()


def _number(text: str, file: Path, row: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DuettoInputError(f"not a finite number: {text!r}", source=row_source(file, row), field=column)
    return value


def _layout(columns: list[str]) -> str:
    names = set(columns)
    if {"victim", "other", "ratio"} <= names:
        return "ratio"
    if {"victim", "other"} <= names and (
        {"isolated", "colocated"} <= names or {"isolated_throughput", "colocated_throughput"} <= names
    ):
        return "throughputs"
    if {"model1", "batchsize1", "speed1", "model2", "batchsize2", "speed2"} <= names:
        return "lucid"
    raise DuettoInputError(
        "not a pair table: want columns victim,other,ratio or victim,other,isolated,colocated "
        f"(throughputs) or Lucid's model1,batchsize1,speed1,model2,batchsize2,speed2; the header has "
        f"{', '.join(c for c in columns if c)}",
        field="interference",
    )


def _lucid_name(record: Mapping[str, str], side: str) -> str:
    name = f"{record['model' + side].strip()}-b{record['batchsize' + side].strip()}"
    gpus = record.get("gpu_num" + side, "1").strip() or "1"
    if gpus not in ("1", "1.0"):
        name += f"-g{gpus}"
    if (record.get("amp" + side, "0").strip() or "0") not in ("0", "0.0"):
        name += "-amp"
    return name


@lru_cache(maxsize=16)
def _read(path: str) -> PairTable:
    file = Path(path)
    frame = read_table(file, (), what="pair table")
    layout = _layout(list(frame.columns))
    if frame.empty:
        raise DuettoInputError("no rows", source=str(file))
    listed: dict[tuple[str, str], list[float | None]] = {}
    clipped: list[str] = []

    def add(victim: str, other: str, xi: float | None, row: int, column: str) -> None:
        if not victim or not other:
            raise DuettoInputError("empty job name", source=row_source(file, row), field=column)
        if xi is not None:
            if xi <= 0:
                raise DuettoInputError(f"must be > 0, got {xi!r}", source=row_source(file, row), field=column)
            if xi < 1.0:
                clipped.append(f"row {row + 1} ({victim} next to {other}: {xi:.3g})")
                xi = 1.0
        listed.setdefault((victim, other), []).append(xi)

    records = cast(list[dict[str, str]], frame.to_dict(orient="records"))
    for row, record in zip(frame.index, records, strict=True):
        row = int(row)
        if layout == "lucid":
            first, second = _lucid_name(record, "1"), _lucid_name(record, "2")
            for victim, other, column in ((first, second, "speed1"), (second, first, "speed2")):
                speed = _number(record[column], file, row, column)
                if speed < 0:
                    raise DuettoInputError(f"must be >= 0, got {speed!r}", source=row_source(file, row), field=column)
                add(victim, other, None if speed == 0 else 1.0 / speed, row, column)
            continue
        victim, other = record["victim"].strip(), record["other"].strip()
        if layout == "ratio":
            text = record["ratio"].strip()
            add(victim, other, None if text.lower() in _FORBIDDEN else _number(text, file, row, "ratio"), row, "ratio")
        else:
            iso_col, co_col = (
                ("isolated", "colocated") if "isolated" in record else ("isolated_throughput", "colocated_throughput")
            )
            isolated = _number(record[iso_col], file, row, iso_col)
            colocated = _number(record[co_col], file, row, co_col)
            if isolated <= 0:
                raise DuettoInputError(f"must be > 0, got {isolated!r}", source=row_source(file, row), field=iso_col)
            if colocated < 0:
                raise DuettoInputError(f"must be >= 0, got {colocated!r}", source=row_source(file, row), field=co_col)
            add(victim, other, None if colocated == 0 else isolated / colocated, row, co_col)
    pairs: dict[tuple[str, str], float | None] = {}
    for pair, values in listed.items():
        numbers = [v for v in values if v is not None]
        # a pair forbidden by any listing stays forbidden; repeated measurements are averaged
        pairs[pair] = None if len(numbers) < len(values) else sum(numbers) / len(numbers)
    return PairTable(str(file), layout, pairs, tuple(clipped))


def read_pair_table(path: PathLike, *, warn: bool = True) -> PairTable:
    """Read a measured pair table (layouts and rules: the module docstring).

    Parameters
    ----------
    path
        The CSV file.
    warn
        Issue a :class:`~formulation.errors.DuettoWarning` when ratios below 1 were clipped to 1.

    Raises
    ------
    DuettoInputError
        Missing file, unknown header, a bad number (naming the row and column).
    """
    table = _read(str(Path(path)))
    if warn and table.clipped:
        shown = "; ".join(table.clipped[:_SHOWN]) + ("; ..." if len(table.clipped) > _SHOWN else "")
        warnings.warn(
            f"{table.source}: {len(table.clipped)} ratio(s) below 1 (co-located faster than alone) "
            f"clipped to 1: {shown}",
            DuettoWarning,
            stacklevel=2,
        )
    return table


def _match(profile: str, names: Mapping[str, str]) -> str | None:
    """The table name for ``profile``: exact, else the longest prefix ending at a non-alphanumeric."""
    lowered = profile.lower()
    if lowered in names:
        return names[lowered]
    best: str | None = None
    for key, name in names.items():
        if lowered.startswith(key) and not lowered[len(key)].isalnum() and (best is None or len(key) > len(best)):
            best = name
    return best


def pair_table_interference(table: PairTable, instance: Instance) -> TableInterference:
    """The instance's interference with the table's ratios applied to the profiles they name.

    Every ordered pair of the instance's profiles gets the table's ratio when both profiles match a
    table name and the table lists that pair, else the instance's current ratio.

    Raises
    ------
    DuettoInputError
        The table gives no pair of the instance's profiles.
    """
    names = {name.lower(): name for pair in table.pairs for name in pair}
    matched = {profile: _match(profile, names) for profile in instance.profiles}
    profiles = instance.profiles
    pairs: dict[tuple[str, str], float | None] = {}
    applied = 0
    for p, key_p in matched.items():
        for q, key_q in matched.items():
            if key_p is not None and key_q is not None and (key_p, key_q) in table.pairs:
                pairs[(p, q)] = table.pairs[(key_p, key_q)]
                applied += 1
            else:
                pairs[(p, q)] = instance.interference.ratio(profiles[p], profiles[q])
    if applied == 0:
        sample_table = ", ".join(sorted(names.values())[:3])
        sample_profiles = ", ".join(sorted(profiles)[:3])
        raise DuettoInputError(
            f"the table gives no pair of this instance's profiles (table names: {sample_table}, ...; "
            f"profiles: {sample_profiles}, ...); names match a profile exactly or as its prefix",
            source=table.source,
            field="interference",
        )
    return TableInterference(pairs, default=None)
