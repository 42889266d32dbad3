"""ChemBench correctness matrix (../shared/data/chembench) as StaticData, for the joint-model tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.engine.joint import StaticData
from tests.conftest import need_shared


def chembench_static() -> StaticData:
    df = pd.read_csv(need_shared("data", "chembench", "matrix_models_all_correct.csv.gz"), index_col=0)
    y = df.to_numpy(dtype=float)
    mask = np.isfinite(y)
    return StaticData(np.nan_to_num(y), mask)
