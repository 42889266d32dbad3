"""Difficulty coverage of a benchmark (paper 003, "Your Benchmark Is an Empirical Measure Over Difficulty").

- :mod:`.core`: targets, min-max normalisation, DDM, gaps, the same-size uniform baseline, the report.
- :mod:`.diagnostics`: the C.3 response-matrix diagnostics.
- :mod:`.calibration`: Algorithm 1 (Appendix D) and its k sweep.
- :mod:`.uncertainty`: the C.6 posterior draws of the metrics and of each tracked gap.
- :mod:`.resolution`: what the numbers can be trusted for: the sum-score lattice of the 1PL difficulties, tail
  gaps beyond the models' ability range, each gap's C.6 interval, Theorem 2.3 / B.2 readouts.
- :mod:`.analysis`: :func:`analyse` = fit + report + diagnostics + readout (+ draws).
- :mod:`.robustness`: the paper's robustness analyses: C.3 leave-one-out, C.5 model comparison by BIC, prior
  sensitivity, the D.1 calibration experiment and the E.2 improvement test.
"""

from . import robustness  # noqa: F401
from .analysis import *  # noqa: F403
from .analysis import __all__ as _analysis_all
from .calibration import *  # noqa: F403
from .calibration import __all__ as _calibration_all
from .core import *  # noqa: F403
from .core import __all__ as _core_all
from .diagnostics import *  # noqa: F403
from .diagnostics import __all__ as _diagnostics_all
from .resolution import *  # noqa: F403
from .resolution import __all__ as _resolution_all
from .uncertainty import *  # noqa: F403
from .uncertainty import __all__ as _uncertainty_all

__all__ = [*_core_all, *_diagnostics_all, *_calibration_all, *_uncertainty_all, *_resolution_all, *_analysis_all]
