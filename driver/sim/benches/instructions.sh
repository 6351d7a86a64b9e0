#!/usr/bin/env bash
# Instructions the driver executes on its hot paths, counted by callgrind (repeatable whatever
# else the machine does). Each hook is named whole (`*>::switch_in`): callgrind toggles collection
# at every function whose name matches, so a pattern that also matched a function the hook calls
# (`mux_switch_in`) would leave that function's instructions out. MSR accesses do nothing in
# these benches (see context_switch.rs and interrupt.rs); what the bench's MSR model still executes
# is counted apart (hardware_share.py), so the counts are the driver's own work, as the targets
# are stated (MSR accesses excluded). The first argument names the simulated
# CPU (skylake by default, or zen4, zen2): `bash driver/sim/benches/instructions.sh zen4`.
set -euo pipefail
model=(--model="${1:-skylake}")
echo "model: ${1:-skylake}"
cd "$(dirname "$0")/../../.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }
cargo bench -p hwpmc-sim --bench context_switch --bench interrupt --no-run 2>/dev/null
newest() { ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/"$1"-* | grep -v '\.d$' | head -n 1; }
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }
# The simulated kernel's critical section (entered for each of the driver's locks; it checks
# their use) is the kernel's work, as a real kernel's preemption counter is.
critical_sections() {
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null | awk '
        /SimKernel as hwpmc::kernel::Kernel>::(enter|exit)_critical_section/ {
            gsub(",", "", $1); sum += $1
        }
        END { print sum + 0 }'
}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The quick run of context_switch.rs makes 1000 switch pairs, of one process or (--alternate) of
# two processes taking turns, each with its own PMCs.
iterations=1000
for mode in same alternate; do
    if [ "$mode" = same ]; then
        echo "context-switch hooks, one process: instructions per PMC per switch (switch_in and switch_out averaged)"
        flags=()
    else
        echo "context-switch hooks, two processes taking turns: instructions per PMC per switch"
        flags=(--alternate)
    fi
    valgrind --tool=callgrind --callgrind-out-file="$out/csw.$mode.0" \
        --toggle-collect='*>::switch_in' --toggle-collect='*>::switch_out' \
        "$(newest context_switch)" --pmcs=0 "${flags[@]}" "${model[@]}" >/dev/null 2>&1
    n=$(total "$out/csw.$mode.0")
    echo "  a thread without PMCs: $n instructions for $iterations switch pairs = $((n / (2 * iterations))) per switch"
    for pmcs in 1 4 8; do
        valgrind --tool=callgrind --callgrind-out-file="$out/csw.$mode.$pmcs" \
            --toggle-collect='*>::switch_in' --toggle-collect='*>::switch_out' --dump-instr=yes \
            "$(newest context_switch)" --pmcs="$pmcs" "${flags[@]}" "${model[@]}" >/dev/null 2>&1
        # Whatever the (free) MSR model executes is not the driver's.
        model_part=$(python3 driver/sim/benches/hardware_share.py "$out/csw.$mode.$pmcs" \
            "$(newest context_switch)")
        n=$(( $(total "$out/csw.$mode.$pmcs") - model_part ))
        per_switch=$((n / (2 * iterations)))
        own=$(( (n - $(critical_sections "$out/csw.$mode.$pmcs")) / (2 * iterations) ))
        echo "  $pmcs PMC(s): $n instructions for $iterations switch pairs (MSR model excluded: $model_part) = $per_switch per switch, $((per_switch / pmcs)) per PMC per switch; without the simulated kernel's critical sections: $((own / pmcs)) per PMC per switch"
    done
done

# The quick run of interrupt.rs takes 2000 samples, 4000 more for the log path, then 2048 samples
# of a CALLCHAIN PMC whose user stacks (32 frames) are walked at return to user mode, then 2000
# samples in the kernel whose 128-frame callchains are walked in the interrupt.
samples=8048
deep=2048
kernel_samples=2000
valgrind --tool=callgrind --callgrind-out-file="$out/intr" --toggle-collect='*Driver<K,H>>::interrupt' \
    --dump-instr=yes "$(newest interrupt)" --parts=pc,log,user "${model[@]}" >/dev/null 2>&1
n=$(total "$out/intr")
# The bench's MSR model (a match on the address, an atomic: see interrupt.rs) is inlined into the
# handler; a real MSR access is one instruction. hardware_share.py finds its instructions through
# the debug information's inline chains.
model_part=$(python3 driver/sim/benches/hardware_share.py "$out/intr" "$(newest interrupt)")
echo "interrupt path: $n instructions for $samples samples = $((n / samples)) per sample (the callchain is walked later); without the bench's MSR model ($((model_part / samples)) per sample): $(((n - model_part) / samples))"
valgrind --tool=callgrind --callgrind-out-file="$out/walk" --toggle-collect='*return_to_user*' \
    "$(newest interrupt)" --parts=user "${model[@]}" >/dev/null 2>&1
n=$(total "$out/walk")
# The simulated kernel's copy_in (a BTreeMap of pages behind a RefCell) is not the driver's work.
sim=$(callgrind_annotate --inclusive=yes "$out/walk" 2>/dev/null | awk '
    /sim\/src\/kernel.rs:<hwpmc_sim::kernel::SimKernel as hwpmc::kernel::Kernel>::copy_in$/ && !done {
        gsub(",", "", $1); print $1; done = 1
    }')
own=$((n - ${sim:-0}))
echo "user-return walk, depth 32: $n instructions for $deep samples = $((n / deep)) per sample; without the simulated kernel's copy_in: $((own / deep)) (walk + CALLCHAIN record)"
for depth in 32 128; do
    valgrind --tool=callgrind --callgrind-out-file="$out/kernel.$depth" \
        --toggle-collect='*kernel_interrupt*' \
        "$(newest interrupt)" --parts=kernel --kernel-depth="$depth" "${model[@]}" >/dev/null 2>&1
    n=$(total "$out/kernel.$depth")
    # The simulated kernel's read_kernel_stack (a RefCell and two BTreeMap look-ups per frame
    # record, where a kernel compares two bounds and copies 16 bytes) is not the driver's work.
    sim=$(callgrind_annotate --inclusive=yes "$out/kernel.$depth" 2>/dev/null | awk '
        /sim\/src\/kernel.rs:<hwpmc_sim::kernel::SimKernel as hwpmc::kernel::Kernel>::read_kernel_stack$/ && !done {
            gsub(",", "", $1); print $1; done = 1
        }')
    own=$((n - ${sim:-0}))
    echo "kernel callchain, depth $depth, walked in the interrupt: $n instructions for $kernel_samples samples = $((n / kernel_samples)) per sample; without the simulated kernel's read_kernel_stack: $((own / kernel_samples)) (interrupt + $((depth - 1))-record walk)"
done

# Counter multiplexing (multiplex.rs): 1000 ticks, or 1000 switch pairs, per run.
cargo bench -p hwpmc-sim --bench multiplex --no-run 2>/dev/null
runs=1000
for part in quiet system process; do
    valgrind --tool=callgrind --callgrind-out-file="$out/mux.$part" --toggle-collect='*Driver<K,H>>::tick' \
        "$(newest multiplex)" --part="$part" >/dev/null 2>&1
    n=$(total "$out/mux.$part")
    own=$((n - $(critical_sections "$out/mux.$part")))
    echo "multiplexing, $part ticks: $n instructions for $runs ticks = $((n / runs)) per tick per CPU; without the simulated kernel's critical sections: $((own / runs))"
done
for pmcs in 4 8 16; do
    valgrind --tool=callgrind --callgrind-out-file="$out/mux.switch.$pmcs" \
        --toggle-collect='*>::switch_in' --toggle-collect='*>::switch_out' \
        "$(newest multiplex)" --part=switch --pmcs="$pmcs" >/dev/null 2>&1
    n=$(total "$out/mux.switch.$pmcs")
    own=$((n - $(critical_sections "$out/mux.switch.$pmcs")))
    echo "multiplexing, context switch with $pmcs multiplexed PMCs: $((n / (2 * runs))) instructions per switch; without the simulated kernel's critical sections: $((own / (2 * runs)))"
done
