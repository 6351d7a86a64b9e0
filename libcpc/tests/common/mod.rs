//! Building and running the C clients of `tests/c` against the libcpc built with these tests,
//! and what the driver says of its rows.
//!
//! Cargo builds the library's `cdylib` and `staticlib` (`libcpc.so`, `libcpc.a`) next to the
//! test executables in `target/<profile>/deps` before running them, so the clients link the
//! code under test, never a stale copy.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// How a client is linked.
#[derive(Debug, Clone, Copy)]
pub enum Linkage {
    /// `-lcpc` against `libcpc.so`, found at run time through an rpath.
    Shared,
    /// `libcpc.a` and the system libraries Rust's standard library needs.
    Static,
}

/// The directory holding `libcpc.so` and `libcpc.a`.
pub fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("the test executable's directory").to_path_buf();
    assert!(
        deps.join("libcpc.so").is_file() && deps.join("libcpc.a").is_file(),
        "libcpc.so and libcpc.a are missing from {}",
        deps.display()
    );
    deps
}

/// Compiles `tests/c/<name>.c` once per test process and linkage; returns the executable.
pub fn build(name: &str, linkage: Linkage) -> PathBuf {
    build_with(name, linkage, &["-std=c99", "-D_GNU_SOURCE"], "")
}

/// Compiles `tests/c/<name>.c` with the compiler options `language` (and `$CC`, or `cxx` if
/// not empty, as the compiler) once per test process, linkage and language.
pub fn build_with(name: &str, linkage: Linkage, language: &[&str], cxx: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let flavour: String = language.concat().chars().filter(char::is_ascii_alphanumeric).collect();
    let key = format!("{name}-{linkage:?}-{flavour}").to_lowercase();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, exe)) = built.iter().find(|(k, _)| *k == key) {
        return exe.clone();
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpc-clients");
    std::fs::create_dir_all(&out_dir).expect("create the clients' directory");
    let exe = out_dir.join(&key);
    let lib = library_dir();
    let cc = if cxx.is_empty() {
        std::env::var("CC").unwrap_or_else(|_| "cc".into())
    } else {
        cxx.into()
    };
    let mut command = Command::new(&cc);
    command
        .args(language)
        .args(["-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(manifest.join("include"))
        .arg(manifest.join("tests/c").join(format!("{name}.c")))
        .arg("-o")
        .arg(&exe);
    match linkage {
        Linkage::Shared => {
            command.arg("-L").arg(&lib).arg("-lcpc").arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        Linkage::Static => {
            command.arg(lib.join("libcpc.a")).args(["-lpthread", "-ldl", "-lm"]);
        }
    }
    let output = command.output().unwrap_or_else(|e| panic!("run the C compiler {cc}: {e}"));
    assert!(
        output.status.success(),
        "compiling {name} ({linkage:?}) failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    built.push((key, exe.clone()));
    exe
}

/// Builds and runs client `name` on `host` with `args`; fails the test unless it exits 0;
/// returns its standard output.
pub fn run(name: &str, linkage: Linkage, host: &str, args: &[&str]) -> String {
    run_with_stderr(name, linkage, host, args).0
}

/// [`run`], returning standard output and standard error.
pub fn run_with_stderr(
    name: &str,
    linkage: Linkage,
    host: &str,
    args: &[&str],
) -> (String, String) {
    run_exe(&build(name, linkage), &format!("{name} ({linkage:?})"), host, args)
}

/// Runs the client `exe` (`what` in messages) on `host` with `args`; fails the test unless it
/// exits 0; returns its standard output and standard error.
pub fn run_exe(exe: &Path, what: &str, host: &str, args: &[&str]) -> (String, String) {
    let mut command = Command::new(exe);
    command.args(args).env("PMC_HOST", host).env("LD_LIBRARY_PATH", library_dir());
    for var in ["PMC_SIM_CPUS", "PMC_SIM_MODEL", "PMC_SIM_SEED"] {
        command.env_remove(var);
    }
    let output = command.output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{what} (PMC_HOST={host}) failed with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
    );
    println!("{what} (PMC_HOST={host}):\n{stdout}");
    (stdout, stderr)
}

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
