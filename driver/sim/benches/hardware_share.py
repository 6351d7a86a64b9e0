#!/usr/bin/env python3
"""Instructions of a callgrind profile that belong to the bench's simulated hardware.

The benches give the driver hardware whose MSR accesses do nothing (`FreeMsrs`, the interrupt
bench's `OverflowingPmu`), but their `read_msr`/`write_msr` still execute a few instructions
(a match on the MSR address, an atomic), inlined into the driver's code. A real kernel's MSR
access is the instruction itself. This counts the instructions whose inline chain (the debug
information's, through `addr2line -i`) passes through an implementation of the driver's hardware
traits (`Msrs`, `Lapic`, `Hardware`, `CpuIdReader`), so that instructions.sh can print the
driver's own work with MSR accesses excluded, as the targets are stated.

Usage: hardware_share.py CALLGRIND_OUT BINARY   (the profile made with --dump-instr=yes)
Prints the count.
"""

import re
import subprocess
import sys
from collections import Counter

HARDWARE = re.compile(r" as hwpmc::hw::(Msrs|Lapic|Hardware|CpuIdReader)>::")


def costs(path):
    """Instructions executed at each address (cost lines only, not the inclusive call costs)."""
    counts = Counter()
    last = 0
    after_calls = False
    with open(path) as profile:
        for line in profile:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("calls="):
                after_calls = True
                continue
            if line[0] not in "0123456789+-*":
                after_calls = False
                continue
            fields = line.split()
            position = fields[0]
            if position == "*":
                address = last
            elif position[0] in "+-":
                address = last + int(position, 0)
            else:
                address = int(position, 0)
            last = address
            if after_calls:
                after_calls = False
                continue
            if len(fields) >= 3:
                counts[address] += int(fields[2])
    return counts


def hardware_addresses(binary, addresses):
    """The addresses whose inline chain passes through a hardware trait's implementation."""
    found = set()
    chunk = 2000
    for start in range(0, len(addresses), chunk):
        part = addresses[start : start + chunk]
        out = subprocess.run(
            ["addr2line", "-e", binary, "-i", "-f", "-C", "-a", *[hex(a) for a in part]],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        current = None
        for line in out.splitlines():
            if line.startswith("0x"):
                current = int(line, 16)
            elif current is not None and HARDWARE.search(line):
                found.add(current)
    return found


def main():
    path, binary = sys.argv[1], sys.argv[2]
    counts = costs(path)
    addresses = sorted(a for a, n in counts.items() if n)
    hardware = hardware_addresses(binary, addresses)
    print(sum(counts[a] for a in hardware))


if __name__ == "__main__":
    main()
