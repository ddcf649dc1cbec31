#!/usr/bin/env bash
# Checks a Promela model of Herald exhaustively with SPIN, in two runs side by side (one per
# core): safety (every assertion and [] (logged == state), over every reachable state) and
# liveness (an SMS for every notice that needs one, under weak fairness, over every cycle).
# Nothing is hashed away (no bitstate, no hash compaction): a pass covers every state. Fails
# on the first error and prints SPIN's counterexample trail; fails too when a search does not
# complete (memory, depth).
#   model/check.sh [model.pml [-DNAME[=VALUE] ...]]
#   default model/herald.pml; -D sets a bound or a variant (model/README.md), e.g. -DMAXCRASH=2
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
file="${1:-$here/herald.pml}"
model="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
shift || true
defs=("$@")
command -v spin >/dev/null || { echo "spin is not installed (Debian: apt-get install -y spin)" >&2; exit 2; }
command -v gcc >/dev/null || { echo "gcc is not installed: SPIN's verifier is C" >&2; exit 2; }

work="$(mktemp -d)"
pids=()
# Each run is a process group of its own (its compiler, its verifier): a failure stops the other.
set -m
cleanup() {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME CFLAGS PAN-ARGS: compiles a verifier in its own directory and starts it.
start() {
  local dir="$work/$1"
  mkdir -p "$dir"
  cp "$here"/*.pml "$dir"/
  cp "$model" "$dir/model.pml"
  (
    cd "$dir"
    spin -a "${defs[@]}" model.pml >/dev/null
    # shellcheck disable=SC2086
    gcc -O2 $2 -DMEMLIM=8192 -o pan pan.c
    # shellcheck disable=SC2086
    ./pan $3 >pan.out 2>&1 || true
  ) &
  pids+=($!)
}

# report NAME TITLE: waits for the run, prints its figures; on an error prints the trail and stops.
report() {
  local dir="$work/$1" pid="$2"
  wait "$pid" || true
  echo "== $3"
  grep -E '^State-vector|states, stored|elapsed time' "$dir/pan.out" || true
  if grep -q 'errors: 0' "$dir/pan.out" && grep -qE 'Search not completed|max search depth too small|out of memory' "$dir/pan.out"; then
    echo "the search did not complete (memory or depth bound): nothing is proven" >&2
    cat "$dir/pan.out" >&2
    exit 1
  fi
  if ! grep -q 'errors: 0' "$dir/pan.out"; then
    grep -E 'pan:|violated|acceptance cycle|non-progress' "$dir/pan.out" >&2 || true
    echo "== counterexample ($3): spin -t -p" >&2
    (cd "$dir" && spin -t -p -k model.pml.trail "${defs[@]}" model.pml) >&2 || true
    exit 1
  fi
}

began=$(date +%s)
start safety "-DSAFETY -DNOFAIR -DCOLLAPSE" "-N log_matches_state -m1000000"
start liveness "-DCOLLAPSE -DNOREDUCE" "-a -f -N sms_when_needed -m1000000"
report safety "${pids[0]}" "safety: assertions and [] (logged == state), every state"
report liveness "${pids[1]}" "liveness: sms_when_needed under weak fairness, every cycle"
echo "model check passed: $(basename "$model") ${defs[*]} ($(($(date +%s) - began)) s)"
