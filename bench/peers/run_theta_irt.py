"""theta-irt: JAX MMLE-EM 2PL (``theta.fit(responses, "2PL")``), abilities by EAP (``model.score``)."""

import time

import peer_io
import theta

Y, out = peer_io.load()
started = time.perf_counter()
model = theta.fit(Y.astype(float), "2PL")
ability, _se = model.score(Y.astype(float), method="EAP")
peer_io.save(out, ability, model.b, started, method="MMLE-EM 2PL, EAP abilities (package defaults)")
