//! Links the pmcstat executable at a fixed address (non-PIE) on Linux, so a short run such as
//! `pmcstat -R log -G -` spends no time relocating the static tables it carries at start.
//! Only the binary is linked so; libpmc's shared library stays position-independent.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os == "linux" && arch == "x86_64" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
