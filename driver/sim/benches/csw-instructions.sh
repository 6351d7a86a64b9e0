#!/usr/bin/env bash
# Instructions the driver's context-switch hooks execute per running process PMC per switch,
# counted by callgrind (repeatable whatever else the machine does). MSR accesses cost nothing in
# this bench (see context_switch.rs), so the count is the driver's own work.
set -euo pipefail
cd "$(dirname "$0")/../../.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }
cargo bench -p hwpmc-sim --bench context_switch --no-run 2>/dev/null
bench=$(ls -t target/release/deps/context_switch-* | grep -v '\.d$' | head -n 1)
iterations=1000
out=$(mktemp -d)
echo "context-switch hooks: instructions per PMC per switch (switch_in and switch_out averaged)"
for pmcs in 1 4 8; do
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$pmcs" \
        --toggle-collect='*switch_in*' --toggle-collect='*switch_out*' \
        "$bench" --pmcs="$pmcs" >/dev/null 2>&1
    total=$(callgrind_annotate "$out/cg.$pmcs" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    per_switch=$((total / (2 * iterations)))
    echo "  $pmcs PMC(s): $total instructions for $iterations switch pairs = $per_switch per switch, $((per_switch / pmcs)) per PMC per switch"
done
rm -rf "$out"
