#!/usr/bin/env bash
# Contract test: schemathesis against a running `deck serve`, driven only by the server's own
# /api/v1/openapi.json. Every check, positive and negative data; any finding fails the run.
#
#   contract/run.sh                 # uses target/debug/deck and target/contract-venv
#   DECK=path/to/deck SCHEMATHESIS=path/to/schemathesis contract/run.sh
#
# Install the tool once with:
#   python3 -m venv target/contract-venv && target/contract-venv/bin/pip install -r contract/requirements.txt
set -euo pipefail
cd "$(dirname "$0")/.."

deck=$(realpath -m "${DECK:-target/debug/deck}")
# What JSON Schema cannot say (valid cron expressions and zone names, a replace's name) is
# told to schemathesis by these hooks.
export SCHEMATHESIS_HOOKS
SCHEMATHESIS_HOOKS=$(realpath contract/hooks.py)
schemathesis=$(realpath -m "${SCHEMATHESIS:-target/contract-venv/bin/schemathesis}")
# Per-operation example budget and a wall-clock cap for the whole run; CI's total is bounded.
max_examples=${CONTRACT_MAX_EXAMPLES:-100}
max_time=${CONTRACT_MAX_TIME:-180}

if [[ ! -x $deck ]]; then
  echo "contract: no deck binary at $deck; run 'cargo build -p deck' first" >&2
  exit 2
fi
if [[ ! -x $schemathesis ]]; then
  echo "contract: no schemathesis at $schemathesis; install it with:" >&2
  echo "  python3 -m venv target/contract-venv && target/contract-venv/bin/pip install -r contract/requirements.txt" >&2
  exit 2
fi

work=$(mktemp -d)
deck_pid=
cleanup() {
  if [[ -n $deck_pid ]]; then
    kill "$deck_pid" 2>/dev/null || true
    wait "$deck_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
# No users: loopback only, every caller is the local operator (the document says so by
# declaring no security requirement). --demo gives the server real jobs and queues.
(cd "$work" && DECK_LOG=warn exec "$deck" serve --demo --listen "127.0.0.1:$port" \
  --database "sqlite://$work/deck.db") >"$work/deck.log" 2>&1 &
deck_pid=$!

# Fuzzing repeats until its budget is spent, so the stateful phase (sequences of calls that
# follow the document's links, e.g. enqueue then read or cancel that job) gets its own run and
# a third of the time.
run_phases() {
  local phases=$1 seconds=$2 mode=$3
  # From the temporary folder: schemathesis keeps a cache of past failures in ./.schemathesis
  # and replays them first; every run here starts clean, as CI does.
  (cd "$work" && exec "$schemathesis" run "$base/api/v1/openapi.json" \
    --wait-for-schema 60 \
    --request-timeout 75 \
    --max-response-time 70 \
    --checks all \
    --mode "$mode" \
    --phases "$phases" \
    --max-examples "$max_examples" \
    --max-time "$seconds" \
    --seed "${CONTRACT_SEED:-20261101}" \
    --generation-database none \
    --report junit --report-dir "$work/report" \
    --no-color)
}

status=0
run_phases examples,coverage,fuzzing $((max_time * 2 / 3)) all || status=$?
# Sequences of valid calls only: invalid input is what the fuzzing phase sends, and in the
# stateful phase schemathesis 4 flagged a POST /schedules whose every field was valid (it
# passed the server's checks and the document's) as "violating format" (seen once in three
# runs; a false positive that made the run fail at random).
run_phases stateful $((max_time - max_time * 2 / 3)) positive || status=$?

if ! kill -0 "$deck_pid" 2>/dev/null; then
  echo "contract: deck serve exited during the run; its log:" >&2
  cat "$work/deck.log" >&2
  status=1
fi
if [[ $status -ne 0 ]]; then
  mkdir -p target/contract
  cp "$work/deck.log" target/contract/deck.log
  cp -r "$work/report" target/contract/ 2>/dev/null || true
  echo "contract: schemathesis reported findings (exit $status); deck's log and the report" \
    "are in target/contract/" >&2
fi
exit "$status"
