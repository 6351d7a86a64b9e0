//! pmcstat(8): count and sample programs with performance-monitoring counters.

fn main() {
    // libpmc reads no environment itself: its settings (PMC_HOST, PMC_SIM_*, …) come from here.
    pmc::config::install(pmc::config::Config::from_env());
    std::process::exit(pmcstat::main(std::env::args_os().skip(1)));
}
