#!/usr/bin/env bash
# Build the peers virtualenv for bench/bench_static_2pl.py and bench/bench_speed.py (issue 16: peers in the same run).
# Not run by CI and never installed into the project venv: the peers (theta-irt pulls JAX) live in their own
# environment so the project's dependency set stays what pyproject.toml declares.
# Usage: bash bench/peers/setup.sh [VENV_DIR]   (default /work/peers-venv)
set -euo pipefail
VENV="${1:-/work/peers-venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# theta-irt 0.1.1: JAX MMLE-EM 2PL (bench/peers/run_theta_irt.py); numpy for peer_io's .npy exchange.
"$VENV/bin/python" -m pip install --quiet "theta-irt==0.1.1" numpy
"$VENV/bin/python" -c 'import theta, jax, numpy; print("theta-irt ok; jax", jax.__version__, "numpy", numpy.__version__)'
