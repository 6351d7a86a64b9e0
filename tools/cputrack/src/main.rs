//! cputrack(1): count events of a command or a process with CPU performance counters.

fn main() {
    // libpmc reads no environment itself: its settings (PMC_HOST, PMC_SIM_*, …) come from here.
    pmc::config::install(pmc::config::Config::from_env());
    std::process::exit(cputrack::main(std::env::args_os().skip(1)));
}
