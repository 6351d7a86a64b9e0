#!/usr/bin/env python3
"""pmcstat side by side with Linux perf on one CPU-bound program.

Prints, as medians of several runs:
  1. wall-time overhead of `pmcstat -p task-clock -- PROG` and `perf stat -e task-clock PROG`
     over PROG alone;
  2. overhead of `pmcstat --freq 1000 -P cpu-clock -O f -- PROG` and `perf record -e cpu-clock -g -F 1000
     PROG` (both sample every millisecond with callchains);
  3. time of `pmcstat -R f -G out` and `perf report --stdio -g` on what those runs recorded.

Usage: python3 tools/pmcstat/bench/compare.py [--runs N] [--pmcstat PATH]
(build first: cargo build --release -p pmcstat). Needs perf, cc.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAM = r"""
#include <stdint.h>
#include <stdlib.h>
volatile uint64_t sink;
__attribute__((noinline)) uint64_t hot(uint64_t n) {
    uint64_t x = 1;
    for (uint64_t i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; __asm__ volatile("" : "+r"(x)); }
    return x;
}
__attribute__((noinline)) uint64_t warm(uint64_t n) { return hot(n / 4); }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200;
    for (int i = 0; i < n; i++) { sink += hot(2000000); sink += warm(2000000); }
    return 0;
}
"""


def timed(cmd, runs, best=False, **kw):
    """Median (or, with best, the shortest) wall time of `runs` runs of cmd, after a warm-up."""
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
        times.append(time.perf_counter() - start)
    return min(times) if best else statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pmcstat", default="target/release/pmcstat")
    ap.add_argument("--iterations", default="200", help="outer loop count of the program")
    a = ap.parse_args()
    for tool in ("perf", "cc"):
        if shutil.which(tool) is None:
            sys.exit(f"compare.py: {tool} is not installed")
    if not os.access(a.pmcstat, os.X_OK):
        sys.exit(f"compare.py: {a.pmcstat} not found: cargo build --release -p pmcstat")
    pmcstat = os.path.abspath(a.pmcstat)
    with tempfile.TemporaryDirectory() as d:
        src, prog = os.path.join(d, "hot.c"), os.path.join(d, "hot")
        open(src, "w").write(PROGRAM)
        subprocess.run(["cc", "-O1", "-fno-omit-frame-pointer", "-o", prog, src], check=True)
        run = [prog, a.iterations]
        base = timed(run, a.runs)
        print(f"program alone: {base * 1000:.1f} ms (median of {a.runs})")

        pmc_count = timed([pmcstat, "-p", "task-clock", "--"] + run, a.runs)
        perf_count = timed(["perf", "stat", "-e", "task-clock", "--"] + run, a.runs)
        print("1. counting task-clock:")
        print(f"   pmcstat -p task-clock  {pmc_count * 1000:8.1f} ms  overhead {100 * (pmc_count / base - 1):+6.2f} %")
        print(f"   perf stat -e task-clock {perf_count * 1000:7.1f} ms  overhead {100 * (perf_count / base - 1):+6.2f} %")
        print(f"   pmcstat - perf stat: {100 * (pmc_count - perf_count) / base:+.2f} % of the program's time (target: within 2 %)")

        log, data = os.path.join(d, "pmc.log"), os.path.join(d, "perf.data")
        pmc_sample = timed([pmcstat, "--freq", "1000", "-P", "cpu-clock", "-O", log, "--"] + run, a.runs)
        perf_sample = timed(["perf", "record", "-q", "-e", "cpu-clock", "-g", "-F", "1000", "-o", data, "--"] + run, a.runs)
        print("2. sampling cpu-clock at 1 kHz with callchains:")
        print(f"   pmcstat -P cpu-clock -O  {pmc_sample * 1000:7.1f} ms  overhead {100 * (pmc_sample / base - 1):+6.2f} %")
        print(f"   perf record -g -F 1000  {perf_sample * 1000:7.1f} ms  overhead {100 * (perf_sample / base - 1):+6.2f} %")
        print(f"   ratio pmcstat/perf record: {pmc_sample / perf_sample:.3f} (target: at most 1)")

        samples = subprocess.run([pmcstat, "-R", log], capture_output=True, text=True).stdout.count("callchain ")
        out = os.path.join(d, "graph.txt")
        # Short commands: the shortest of many runs is the least noisy figure (both include
        # process start-up, measured from Python).
        pmc_report = timed([pmcstat, "-R", log, "-G", out], 5 * a.runs, best=True)
        perf_report = timed(["perf", "report", "--stdio", "-g", "-i", data], 5 * a.runs, best=True)
        print(f"3. report ({samples} samples in the pmcstat log; shortest of {5 * a.runs} runs):")
        print(f"   pmcstat -R -G          {pmc_report * 1000:8.1f} ms")
        print(f"   perf report --stdio -g {perf_report * 1000:8.1f} ms")
        print(f"   perf report / pmcstat: {perf_report / pmc_report:.2f}x (target: at least 2x)")


if __name__ == "__main__":
    main()
