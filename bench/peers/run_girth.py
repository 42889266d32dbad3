"""girth: marginal-ML 2PL (``girth.twopl_mml``, items x participants), with the EAP abilities it returns."""

import time

import peer_io
from girth import twopl_mml

Y, out = peer_io.load()
started = time.perf_counter()
result = twopl_mml(Y.T.astype(int))
peer_io.save(out, result["Ability"], result["Difficulty"], started, method="twopl_mml (package defaults)")
