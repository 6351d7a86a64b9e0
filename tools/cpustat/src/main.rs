//! cpustat(8): count events on every CPU with CPU performance counters.

fn main() {
    std::process::exit(cpustat::main(std::env::args_os().skip(1)));
}
