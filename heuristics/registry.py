"""The policy registry: every scheduling policy duetto knows, by name.

A policy module registers itself at import time::

    from heuristics.registry import register_policy

    register_policy("muri-s", lambda **options: MuriPolicy(priority="srsf", **options),
                    "Muri with SRSF priorities: multi-round Blossom grouping of up to C jobs per GPU "
                    "(Muri SIGCOMM'22, Algorithm 1)")

``make_policy(name, **options)`` builds a fresh policy object (policies keep per-run state, so every
simulation gets its own). The built-in policy modules listed in :data:`POLICY_MODULES` are imported on
first use.

A name may carry a placement suffix: ``"<policy>+hay"`` builds ``<policy>`` with Hay's busyness-score
placement (``placement="hay"``) instead of the default consolidated placement, for every policy whose
factory accepts a ``placement`` option.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from formulation.errors import DuettoInputError
from heuristics.core import Policy

#: Modules that register policies when imported (in listing order).
POLICY_MODULES: tuple[str, ...] = (
    "heuristics.baselines",
    "heuristics.tiresias",
    "heuristics.peers",
    "heuristics.sjf_bsbf",
    "heuristics.lookahead",
    "heuristics.muri",
    "heuristics.tesserae",
)

#: Placement suffixes a policy name may carry, mapped to the ``placement`` option they set.
PLACEMENT_SUFFIXES: dict[str, str] = {"+hay": "hay"}

PolicyFactory = Callable[..., Policy]


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """A registered policy: its name, factory and one-line description."""

    name: str
    factory: PolicyFactory
    description: str


_REGISTRY: dict[str, PolicyInfo] = {}
_loaded = False


def register_policy(name: str, factory: PolicyFactory, description: str) -> None:
    """Register a policy under ``name``.

    Parameters
    ----------
    name
        Lower-case name used on the command line (``duetto simulate --policy NAME``).
    factory
        Called with keyword options (``make_policy(name, **options)``) and returns a new policy
        object following :class:`heuristics.core.Policy`.
    description
        One line for ``duetto policies``: what it does and the paper section it implements.

    Raises
    ------
    ValueError
        If ``name`` is empty, contains a placement suffix, or is already registered with another factory.
    """
    if not name or name != name.strip() or any(suffix in name for suffix in PLACEMENT_SUFFIXES):
        raise ValueError(f"invalid policy name {name!r}")
    existing = _REGISTRY.get(name)
    if existing is not None and existing.factory is not factory:
        raise ValueError(f"policy '{name}' is already registered")
    _REGISTRY[name] = PolicyInfo(name, factory, description)


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in POLICY_MODULES:
        importlib.import_module(module)


def available_policies() -> list[PolicyInfo]:
    """Every registered policy, in registration order."""
    _load_builtin()
    return list(_REGISTRY.values())


def policy_names() -> list[str]:
    """Names of every registered policy."""
    return [info.name for info in available_policies()]


def _split_name(name: str) -> tuple[str, dict[str, Any]]:
    options: dict[str, Any] = {}
    base = name.strip().lower()
    for suffix, placement in PLACEMENT_SUFFIXES.items():
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            options["placement"] = placement
    return base, options


def make_policy(name: str, **options: Any) -> Policy:
    """Build a new policy object by registered name.

    Parameters
    ----------
    name
        A registered name, optionally with a placement suffix (``"sjf-ffs+hay"``).
    options
        Keyword options passed to the policy's factory (e.g. ``round_length=360.0``).

    Raises
    ------
    DuettoInputError
        For an unknown name (the message lists the known ones) or options the policy does not take.
    """
    _load_builtin()
    base, suffix_options = _split_name(name)
    info = _REGISTRY.get(base)
    if info is None:
        known = ", ".join(sorted(_REGISTRY))
        raise DuettoInputError(f"unknown policy '{name}'; available: {known}", field="policy")
    merged = {**suffix_options, **options}
    if not merged:
        return info.factory()
    try:
        return info.factory(**merged)
    except TypeError as error:
        raise DuettoInputError(
            f"policy '{base}' does not take the options {sorted(merged)}: {error}", field="policy"
        ) from None
