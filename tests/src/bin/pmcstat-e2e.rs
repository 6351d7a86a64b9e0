//! pmcstat, built in this package so that its tests run the tool as a separate process (a
//! package's tests can only name its own binaries): the same one-line `main` as
//! `tools/pmcstat/src/main.rs`.

fn main() {
    std::process::exit(pmcstat::main(std::env::args_os().skip(1)));
}
