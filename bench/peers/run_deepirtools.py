"""deepirtools: importance-weighted amortized VI (``IWAVE``), a 1-factor graded model with two categories = 2PL.

P(y=1 | x) = sigmoid(alpha_j + beta_j x), so the 2PL difficulty is -alpha_j / beta_j.  The factor's sign is not
identified; we orient it so the mean loading is positive (the usual convention), flipping abilities and difficulties together.  Abilities are the encoder's
posterior means (``scores(..., iw_samples=1)``).

Settings: the package defaults (Adam lr 1e-3, mini-batches of 32, loss checked every 100 steps) except
``n_intervals=10`` (stop after 10 checks without improvement instead of 100) and ``iw_samples=5`` (its docs' IWAVE
examples use 5-10).  With the default ``n_intervals=100`` a 300 x 100 matrix did not finish in 300 s here.
"""

import time

import deepirtools
import numpy as np
import peer_io
import torch
from deepirtools import IWAVE

Y, out = peer_io.load()
started = time.perf_counter()
deepirtools.manual_seed(0)
data = torch.from_numpy(Y.astype(np.float32))
model = IWAVE(model_type="grm", latent_size=1, n_cats=[2] * Y.shape[1], n_intervals=10, verbose=False)
model.fit(data, iw_samples=5)
loadings = model.loadings.detach().numpy().ravel()
intercepts = model.intercepts.detach().numpy().ravel()
scores = model.scores(data, iw_samples=1).detach().numpy().ravel()
sign = 1.0 if loadings.mean() >= 0 else -1.0
peer_io.save(out, sign * scores, -intercepts / (sign * loadings), started,
              method="IWAVE grm(2 cats), latent_size 1, iw_samples 5, n_intervals 10, batch 32, lr 1e-3")
