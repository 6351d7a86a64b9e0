#!/usr/bin/env bash
# Instructions the driver executes on its hot paths, counted by callgrind (repeatable whatever
# else the machine does). MSR accesses cost nothing in these benches (see context_switch.rs and
# interrupt.rs), so the counts are the driver's own work.
set -euo pipefail
cd "$(dirname "$0")/../../.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }
cargo bench -p hwpmc-sim --bench context_switch --bench interrupt --no-run 2>/dev/null
newest() { ls -t target/release/deps/"$1"-* | grep -v '\.d$' | head -n 1; }
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

iterations=1000
echo "context-switch hooks: instructions per PMC per switch (switch_in and switch_out averaged)"
for pmcs in 1 4 8; do
    valgrind --tool=callgrind --callgrind-out-file="$out/csw.$pmcs" \
        --toggle-collect='*switch_in*' --toggle-collect='*switch_out*' \
        "$(newest context_switch)" --pmcs="$pmcs" >/dev/null 2>&1
    n=$(total "$out/csw.$pmcs")
    per_switch=$((n / (2 * iterations)))
    echo "  $pmcs PMC(s): $n instructions for $iterations switch pairs = $per_switch per switch, $((per_switch / pmcs)) per PMC per switch"
done

# The quick run of interrupt.rs takes 2000 samples, then 4000 more for the log path.
samples=6000
valgrind --tool=callgrind --callgrind-out-file="$out/intr" --toggle-collect='*Driver*interrupt*' \
    "$(newest interrupt)" >/dev/null 2>&1
n=$(total "$out/intr")
echo "interrupt path: $n instructions for $samples samples = $((n / samples)) per sample (callchain depth 1)"
