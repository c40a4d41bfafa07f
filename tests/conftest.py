"""Test-session setup that must happen before NumPy loads.

OpenBLAS picks its kernels by CPU at load time; on CPUs with AVX-512 its ``SkylakeX`` kernels round the
Pollux profile fits (``scipy.optimize.least_squares``, :mod:`formulation.traces.pollux`) differently in
the ninth digit. SJF-BSBF's exact ties used to flip with that noise (table3-small: 106,231 s against
105,167 s of total JCT); since they wait within :data:`heuristics.sjf_bsbf.TIE_TOLERANCE`, both kernels
give the same schedules, and only the ninth digits differ.
The documented tables were computed with the ``Haswell`` kernels, which every x86-64 CPU with AVX2 runs,
so the tests ask for those (a value set by the caller wins). The same variable reproduces the documents'
numbers by hand to the last digit (docs/results.md).
"""

from __future__ import annotations

import os
import sys

if "numpy" in sys.modules:  # too late to choose the kernels: say so rather than compare noise
    raise RuntimeError("tests/conftest.py must run before NumPy is imported (OPENBLAS_CORETYPE)")
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
