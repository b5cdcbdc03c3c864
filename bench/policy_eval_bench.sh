#!/usr/bin/env bash
# `airlock policy eval` as a user runs it, process start included, against Inspect's
# in-process policy chain on the same 10-step policy and the same calls.
#
# Usage (after `cargo build --release -p airlock`):
#
#     PYTHON=/path/to/venv-with-inspect-ai/bin/python bench/policy_eval_bench.sh [rounds] [reps]
#
# AIRLOCK names another binary (relative to the repository root); QUIET=1.0 waits before each round until the 1-minute load
# average is below 1.0.
#
# Each round times `airlock --version`, `policy eval` of an empty file, of bench/corpus.jsonl
# (1,000 calls) and of that corpus repeated 20 times (20,000 calls), `reps` times each in
# turn, then runs bench/inspect_policy_bench.py once; Airlock's and Inspect's measurements
# alternate so that both see the same load. Times are wall clock, taken by this shell around
# each command (fork and exec included), and every figure is the median over all rounds.
# The per-call slope is (20,000 calls - 1,000 calls) / 19,000; the whole-command ratio
# compares Inspect's per-call cost times 1,000 (its interpreter start and imports left out)
# with Airlock's whole command on 1,000 calls.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
reps=${2:-21}
airlock=${AIRLOCK:-target/release/airlock}
python=${PYTHON:-python3}
policy=bench/policy10.yaml
corpus=bench/corpus.jsonl

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
: >"$scratch/empty.jsonl"
for _ in $(seq 20); do cat "$corpus"; done >"$scratch/corpus20.jsonl"

# Microseconds of wall clock for one run of the command given.
elapsed_us() {
    local start=$EPOCHREALTIME
    "$@" >/dev/null
    local end=$EPOCHREALTIME
    echo $((${end/./} - ${start/./}))
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

eval_cmd=("$airlock" policy eval --policy "$policy" --kind approval --calls)
for round in $(seq "$rounds"); do
    while [ -n "${QUIET:-}" ] && awk -v max="$QUIET" '{ exit !($1 >= max) }' /proc/loadavg; do
        sleep 5
    done
    for _ in $(seq "$reps"); do
        elapsed_us "$airlock" --version >>"$scratch/version"
        elapsed_us "${eval_cmd[@]}" "$scratch/empty.jsonl" >>"$scratch/empty"
        elapsed_us "${eval_cmd[@]}" "$corpus" >>"$scratch/1k"
        elapsed_us "${eval_cmd[@]}" "$scratch/corpus20.jsonl" >>"$scratch/20k"
    done
    "$python" bench/inspect_policy_bench.py --json >"$scratch/inspect.$round.json"
    echo "round $round of $rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

version=$(median <"$scratch/version")
empty=$(median <"$scratch/empty")
one_k=$(median <"$scratch/1k")
twenty_k=$(median <"$scratch/20k")
inspect=$(cat "$scratch"/inspect.*.json | "$python" -c '
import json, statistics, sys
runs = [json.loads(line) for line in sys.stdin]
keys = ["policy_approver_no_events", "policy_approver", "apply_tool_approval"]
print(" ".join(str(statistics.median(r["us_per_call"][k] for r in runs)) for k in keys))
print(runs[0]["inspect_ai"])')

awk -v version="$version" -v empty="$empty" -v one_k="$one_k" -v twenty_k="$twenty_k" \
    -v inspect="$inspect" -v rounds="$rounds" -v reps="$reps" '
BEGIN {
    split(inspect, lines, "\n"); split(lines[1], i, " ")
    slope = (twenty_k - one_k) / 19000
    printf "airlock policy eval, wall clock, median of %d runs each (%d rounds):\n", rounds * reps, rounds
    printf "  airlock --version                %9.2f ms\n", version / 1000
    printf "  empty calls file                 %9.2f ms\n", empty / 1000
    printf "  1,000 calls                      %9.2f ms\n", one_k / 1000
    printf "  20,000 calls                     %9.2f ms\n", twenty_k / 1000
    printf "  per call (slope 1k..20k)         %9.2f µs\n", slope
    printf "inspect-ai %s in process, per call, median of %d runs:\n", lines[2], rounds
    split("policy_approver_no_events policy_approver apply_tool_approval", names, " ")
    for (k = 1; k <= 3; k++)
        printf "  %-32s %9.2f µs   whole command (1,000 calls) %5.1fx   per call %6.1fx\n", \
            names[k], i[k], i[k] * 1000 / one_k, i[k] / slope
}'
