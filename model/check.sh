#!/usr/bin/env bash
# Checks a Promela model of Herald exhaustively with SPIN: the safety run (every assertion and
# the log invariant, all states), then the liveness run (an SMS for every notice that needs one,
# under weak fairness). Fails on the first error and prints SPIN's counterexample trail.
#   model/check.sh [model.pml]      default: model/herald.pml
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="$(cd "$(dirname "${1:-$here/herald.pml}")" && pwd)/$(basename "${1:-$here/herald.pml}")"
command -v spin >/dev/null || { echo "spin is not installed (Debian: apt-get install -y spin)" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here"/*.pml "$work"/
cp "$model" "$work/model.pml"
cd "$work"

# run NAME CFLAGS PAN-ARGS: one verification; a failure prints the trail and stops the script.
run() {
  local name="$1" cflags="$2" args="$3"
  echo "== $name"
  spin -a model.pml >/dev/null
  # shellcheck disable=SC2086
  gcc -O2 $cflags -DMEMLIM=4096 -o pan pan.c
  # shellcheck disable=SC2086
  ./pan $args >pan.out 2>&1 || true
  grep -E 'State-vector|states, stored|errors:|elapsed time' pan.out || true
  if grep -q 'Search not completed' pan.out && ! grep -q 'errors: [1-9]' pan.out; then
    echo "the search did not complete (memory or depth bound): nothing is proven" >&2
    cat pan.out >&2
    exit 1
  fi
  if ! grep -q 'errors: 0' pan.out; then
    grep -E 'pan:|violated|acceptance cycle' pan.out >&2 || true
    echo "== counterexample ($name): spin -t -p" >&2
    spin -t -p -k model.pml.trail model.pml >&2 || true
    exit 1
  fi
}

run "safety: assertions and [] (logged == state), exhaustive" \
  "-DSAFETY -DNOFAIR -DCOLLAPSE" "-N log_matches_state -m1000000"
run "liveness: sms_when_needed under weak fairness" \
  "-DCOLLAPSE -DNOREDUCE" "-a -f -N sms_when_needed -m1000000"
echo "model check passed: $(basename "$model")"
