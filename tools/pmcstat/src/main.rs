//! pmcstat(8): count and sample programs with performance-monitoring counters.

fn main() {
    std::process::exit(pmcstat::main(std::env::args_os().skip(1)));
}
