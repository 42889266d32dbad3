"""mirt (PyPI, Rust backend): ``mirt.fit_mirt(responses, model="2PL")``, abilities by ``mirt.fscores(..., "EAP")``."""

import time

import mirt
import peer_io

Y, out = peer_io.load()
Y = Y.astype(int)
started = time.perf_counter()
result = mirt.fit_mirt(Y, model="2PL")
scores = mirt.fscores(result, Y, method="EAP")
peer_io.save(out, scores.theta, result.model.difficulty, started,
         method="EM 2PL, EAP abilities (package defaults)", converged=bool(result.converged),
         iterations=int(result.n_iterations))
