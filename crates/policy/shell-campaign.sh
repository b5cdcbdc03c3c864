#!/usr/bin/env bash
# The offline campaign of the differential test against real bash 5.2: many seeds of the
# generator in crates/policy/tests/shell_vs_bash.rs, each run as its own test process.
#
#   crates/policy/shell-campaign.sh [SEEDS] [LINES_PER_SEED]
#
# Defaults: 40 seeds of 25,000 lines (1,000,000 lines). Prints one summary line per seed and
# the totals; exits non-zero on the first seed with a violation, after printing it.
set -euo pipefail
seeds=${1:-40}
lines=${2:-25000}
cd "$(dirname "$0")/../.."
cargo test --release -p airlock-policy --test shell_vs_bash --no-run >/dev/null
total=0
approved=0
for ((seed = 1; seed <= seeds; seed++)); do
    out=$(AIRLOCK_SHELL_SEED=$seed AIRLOCK_SHELL_LINES=$lines \
        cargo test -q --release -p airlock-policy --test shell_vs_bash -- --nocapture 2>&1) || {
        echo "$out"
        echo "seed $seed: violations (above)" >&2
        exit 1
    }
    summary=$(grep -E '^seed ' <<<"$out")
    echo "$summary"
    total=$((total + lines))
    approved=$((approved + $(sed -E 's/.* ([0-9]+) approved.*/\1/' <<<"$summary")))
done
echo "campaign: $seeds seeds, $total lines, $approved approved and run by bash, 0 violations"
