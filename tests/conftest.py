"""Test-session setup that must happen before NumPy loads.

OpenBLAS picks its kernels by CPU at load time; on CPUs with AVX-512 its ``SkylakeX`` kernels round the
Pollux profile fits (``scipy.optimize.least_squares``, :mod:`formulation.traces.pollux`) differently in
the ninth digit, and SJF-BSBF's choices between equally good options flip with that noise (table3-small:
106,231 s against 105,167 s of total JCT). The documented tables were computed with the ``Haswell``
kernels, which every x86-64 CPU with AVX2 runs, so the tests ask for those (a value set by the caller
wins). The same variable reproduces the documents' numbers by hand (docs/results.md).
"""

from __future__ import annotations

import os
import sys

if "numpy" in sys.modules:  # too late to choose the kernels: say so rather than compare noise
    raise RuntimeError("tests/conftest.py must run before NumPy is imported (OPENBLAS_CORETYPE)")
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
