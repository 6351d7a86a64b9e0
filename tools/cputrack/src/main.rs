//! cputrack(1): count events of a command or a process with CPU performance counters.

fn main() {
    std::process::exit(cputrack::main(std::env::args_os().skip(1)));
}
