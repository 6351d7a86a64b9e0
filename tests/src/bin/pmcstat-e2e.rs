//! pmcstat, built in this package so that its tests run the tool as a separate process (a
//! package's tests can only name its own binaries): the same `main` as
//! `tools/pmcstat/src/main.rs`.

fn main() {
    // libpmc reads no environment itself: its settings (PMC_HOST, PMC_SIM_*, …) come from here.
    pmc::config::install(pmc::config::Config::from_env());
    std::process::exit(pmcstat::main(std::env::args_os().skip(1)));
}
