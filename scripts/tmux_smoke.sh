#!/usr/bin/env bash
# Smoke test of the real terminal app: run `benchloupe open` in tmux at 80x24 on a fresh demo database, press
# keys like a curator and check the captured screen text. Exits non-zero (printing the screen) on a failure.
# Usage: scripts/tmux_smoke.sh [python]   (default: .venv/bin/python, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
command -v tmux >/dev/null || { echo "tmux is not installed" >&2; exit 2; }

WORK="$(mktemp -d)"
SESSION="benchloupe-smoke-$$"
DB="$WORK/demo.db"
cleanup() { tmux kill-session -t "$SESSION" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$PY" -m benchloupe demo --db "$DB" --bare >/dev/null
tmux new-session -d -s "$SESSION" -x 80 -y 24 "XDG_DATA_HOME=$WORK $PY -m benchloupe open $DB; sleep 30"

screen() { tmux capture-pane -p -t "$SESSION"; }

# wait_for TEXT [SECONDS]: poll the pane until TEXT appears
wait_for() {
  local text="$1" limit="${2:-30}" i=0
  while (( i < limit * 10 )); do
    if screen | grep -qF -- "$text"; then return 0; fi
    sleep 0.1; i=$((i + 1))
  done
  echo "FAILED: '$text' did not appear within ${limit}s; the screen was:" >&2
  screen >&2
  exit 1
}

# keys K...: send keys one by one; after Escape wait longer, or the next key arrives as alt+KEY
keys() {
  for k in "$@"; do
    tmux send-keys -t "$SESSION" "$k"
    if [[ "$k" == Escape ]]; then sleep 0.6; else sleep 0.15; fi
  done
}

wait_for "demo-math"
wait_for "3 benchmarks in demo.db"
keys End Enter                       # open the last benchmark (demo-math)
wait_for "240 of 240 items"
keys / m a t h - 0 0 1
wait_for "10 of 240 items"           # math-0010 .. math-0019
keys Escape
wait_for "240 of 240 items"
keys Enter                           # the item panel
wait_for "Outcomes by ability"
keys Escape 4                        # Runs
wait_for "Static 2PL fit"
keys C-p                             # the command palette: "area: verb"
tmux send-keys -t "$SESSION" -l "runs: start static"; sleep 0.5
keys Enter
wait_for "Start static"
keys C-s
wait_for "done (run #1)" 60
keys 3                               # Models: ranks from the fit
wait_for "every column from run #"
keys '?'
wait_for "Keys on Models"
keys Escape 5
wait_for "no anomalies for this benchmark yet"
keys q
sleep 1
if tmux list-panes -t "$SESSION" -F '#{pane_current_command}' 2>/dev/null | grep -q python; then
  echo "FAILED: q did not quit the app" >&2; screen >&2; exit 1
fi
echo "tmux smoke test passed"
