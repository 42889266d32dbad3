"""Difficulty coverage of a benchmark (paper 003, "Your Benchmark Is an Empirical Measure Over Difficulty").

- :mod:`.core`: normalisation, DDM, gaps, the uniform baseline, C.3 diagnostics, Algorithm 1, C.6 draws and
  :func:`analyse` (fit + report + diagnostics + resolution readout).
- :mod:`.resolution`: what the numbers can be trusted for: the sum-score lattice of the 1PL difficulties, tail
  gaps beyond the models' ability range, each gap's C.6 interval, Theorem 2.3 / B.2 readouts.
- :mod:`.robustness`: the paper's robustness analyses: C.3 leave-one-out, C.5 model comparison by BIC, prior
  sensitivity, the D.1 calibration experiment and the E.2 improvement test.
"""

from .core import *  # noqa: F403
from .core import __all__ as _core_all
from .resolution import *  # noqa: F403
from .resolution import __all__ as _resolution_all

__all__ = [*_core_all, *_resolution_all]
from . import robustness  # noqa: E402,F401
