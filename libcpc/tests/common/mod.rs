//! What the driver says of its rows, shared by the Rust integration tests of this directory.
//! (The C clients of libcpc, and the helpers that build them, are in the workspace's `tests/`
//! crate: `tests/tests/c_libcpc.rs`.)
#![allow(dead_code, unreachable_pub)]

/// The rows of the CPUs below `ncpu` that hold a PMC: (cpu, row name, owner pid).
pub fn busy_rows(ncpu: u32) -> Vec<(u32, String, i32)> {
    let mut busy = Vec::new();
    for cpu in 0..ncpu {
        for row in pmc::api::pmc_info(cpu).expect("pmc_info") {
            if row.pm_ownerpid != -1 && row.pm_ownerpid != 0 {
                let end = row.pm_name.iter().position(|&b| b == 0).unwrap_or(row.pm_name.len());
                let name = String::from_utf8_lossy(&row.pm_name[..end]).into_owned();
                busy.push((cpu, name, row.pm_ownerpid));
            }
        }
    }
    busy
}
