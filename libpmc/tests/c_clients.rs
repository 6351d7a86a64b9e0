//! C programs written against `<pmc.h>`, `<pmclog.h>` and `<pmc_host.h>` (`tests/c/client_*.c`),
//! compiled with the system C compiler as C99 with every warning an error, linked with
//! `libpmc.so` (found through an rpath) and with `libpmc.a`, and run on the Linux and simulator
//! hosts. Each program checks its own results and exits 0; it prints what it measured.
//!
//! # Finding the library
//!
//! Cargo compiles this package's library once, with all its crate types (`rlib`, `cdylib`,
//! `staticlib`), before it builds any integration test, and leaves `libpmc.so` and `libpmc.a` next
//! to the test executables in `target/<profile>/deps`. So this test takes them from the directory
//! of its own executable: they come from the same compilation as the code under test and are
//! never stale. If they are not there (an unusual layout), it builds them with `cargo build -p
//! libpmc --lib` into a target directory of its own under `CARGO_TARGET_TMPDIR` — not the running
//! cargo's, whose lock is held while tests run — and uses those.
//!
//! The compiler is `$CC` (default `cc`).
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The built library.
struct Library {
    /// The directory holding `libpmc.so` (for `-L` and the rpath).
    shared_dir: PathBuf,
    /// `libpmc.a`.
    archive: PathBuf,
}

fn library() -> &'static Library {
    static LIBRARY: OnceLock<Library> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's own path");
        let deps = exe.parent().expect("the test executable's directory").to_path_buf();
        // Not `target/<profile>` itself: what `cargo build` left there may be older than the
        // code under test.
        if deps.join("libpmc.so").is_file() && deps.join("libpmc.a").is_file() {
            return Library { archive: deps.join("libpmc.a"), shared_dir: deps };
        }
        build_library()
    })
}

/// Builds the library into a target directory of this test's own.
fn build_library() -> Library {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-clients-libpmc");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let status = Command::new(cargo)
        .args(["build", "--lib", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("run cargo build for libpmc");
    assert!(status.success(), "cargo build --lib of libpmc failed");
    let dir = target.join("debug");
    Library { archive: dir.join("libpmc.a"), shared_dir: dir }
}

/// How a client is linked.
#[derive(Debug, Clone, Copy)]
enum Linkage {
    /// With `-lpmc` against `libpmc.so`, found at run time through an rpath.
    Shared,
    /// With `libpmc.a` and the system libraries Rust's standard library needs.
    Static,
}

/// Compiles `tests/c/<name>.c` linked as `linkage`, once per test process and linkage (tests
/// running at once share the executable: compiling it twice into one path would let one test
/// run a file the other's linker is replacing).
fn build(name: &str, linkage: Linkage) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let key = format!("{name}-{linkage:?}");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, exe)) = built.iter().find(|(k, _)| *k == key) {
        return exe.clone();
    }
    let exe = compile(name, linkage);
    built.push((key, exe.clone()));
    exe
}

fn compile(name: &str, linkage: Linkage) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = manifest.join("tests/c").join(format!("{name}.c"));
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-clients");
    std::fs::create_dir_all(&out_dir).expect("create the clients' directory");
    // One path per client and linkage: each test run rebuilds it (once), so old ones do not
    // pile up in the target directory.
    let exe = out_dir.join(format!("{name}-{linkage:?}").to_lowercase());
    let lib = library();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut command = Command::new(&cc);
    command
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(manifest.join("include"))
        .arg(&source)
        .arg("-o")
        .arg(&exe);
    match linkage {
        Linkage::Shared => {
            command
                .arg("-L")
                .arg(&lib.shared_dir)
                .arg("-lpmc")
                .arg(format!("-Wl,-rpath,{}", lib.shared_dir.display()));
        }
        Linkage::Static => {
            command.arg(&lib.archive).args(["-lpthread", "-ldl", "-lm"]);
        }
    }
    let output = command.output().unwrap_or_else(|e| panic!("run the C compiler {cc}: {e}"));
    assert!(
        output.status.success(),
        "compiling {} ({linkage:?}) failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// A directory of its own for one client run, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("c-clients-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds and runs client `name` on `host`, with a scratch directory as its argument; fails
/// the test unless it exits 0; returns its standard output.
fn run(name: &str, linkage: Linkage, host: &str) -> String {
    let exe = build(name, linkage);
    let scratch = Scratch::new(&format!("{name}-{linkage:?}-{host}"));
    let mut command = Command::new(&exe);
    command.arg(&scratch.0).env("PMC_HOST", host);
    for var in ["PMC_SIM_CPUS", "PMC_SIM_MODEL", "PMC_SIM_SEED"] {
        command.env_remove(var);
    }
    // cargo puts target/<profile> on LD_LIBRARY_PATH, which the loader searches before the
    // client's rpath, and a libpmc.so left there by an earlier `cargo build` may be stale.
    command.env("LD_LIBRARY_PATH", &library().shared_dir);
    let output: Output = command.output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{name} ({linkage:?}, PMC_HOST={host}) failed with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    // The executable stays: other tests of this process run it too (it is built once).
    println!("{name} ({linkage:?}, PMC_HOST={host}):\n{stdout}");
    stdout
}

#[cfg(target_os = "linux")]
#[test]
fn own_page_faults_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_page_faults", linkage, "linux");
        assert!(out.starts_with("page-faults "), "{out}");
    }
}

#[test]
fn simulated_instructions_are_exact() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_sim_instructions", linkage, "sim");
        assert_eq!(out, "instructions 10000000\n");
    }
}

#[test]
fn life_cycle_on_the_simulator() {
    let out = run("client_lifecycle", Linkage::Shared, "sim");
    assert!(out.contains("counted 10000000\n") && out.ends_with("lifecycle ok\n"), "{out}");
}

#[cfg(target_os = "linux")]
#[test]
fn life_cycle_on_the_linux_host() {
    let out = run("client_lifecycle", Linkage::Static, "linux");
    assert!(out.ends_with("lifecycle ok\n"), "{out}");
}

#[test]
fn a_forked_child_owns_none_of_its_parents_pmcs_on_either_host() {
    for host in ["sim", "linux"] {
        let out = run("client_fork", Linkage::Shared, host);
        assert_eq!(out, "fork ok\n", "{host}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn an_owner_that_exits_without_closing_its_log_has_it_written_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_exit_log", linkage, "linux");
        assert_eq!(out, "exit log ok\n");
    }
}

#[test]
fn error_paths_on_the_simulator() {
    let out = run("client_errors", Linkage::Shared, "sim");
    assert!(out.ends_with("errors ok\n"), "{out}");
}

#[cfg(target_os = "linux")]
#[test]
fn error_paths_on_the_linux_host() {
    let out = run("client_errors", Linkage::Shared, "linux");
    assert!(out.ends_with("errors ok\n"), "{out}");
}

#[test]
fn pmclog_reads_a_simulator_log_the_same_in_any_chunks() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_pmclog", linkage, "sim");
        assert!(out.contains(" 100 callchains,") && out.ends_with("pmclog ok\n"), "{out}");
    }
}

/// The pmc(3), pmclog(3) and `<pmc_host.h>` functions are all exported by `libpmc.so`.
#[cfg(target_os = "linux")]
#[test]
fn the_shared_library_exports_every_declared_function() {
    let lib = library().shared_dir.join("libpmc.so");
    let output = Command::new("nm").arg("-D").arg("--defined-only").arg(&lib).output();
    let Ok(output) = output else {
        eprintln!("nm is not installed; skipping");
        return;
    };
    let symbols = String::from_utf8_lossy(&output.stdout);
    let exported: std::collections::BTreeSet<&str> =
        symbols.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let mut missing = Vec::new();
    for header in ["pmc.h", "pmclog.h", "pmc_host.h"] {
        let text = std::fs::read_to_string(include.join(header)).expect("read the header");
        for name in declared_functions(&text) {
            if !exported.contains(name.as_str()) {
                missing.push(format!("{name} ({header})"));
            }
        }
    }
    assert!(missing.is_empty(), "declared but not exported by libpmc.so: {missing:?}");
}

/// The names of the functions a header declares: identifiers directly followed by `(` on lines
/// that start a prototype (`int\tpmc_read(`, `const char\t*pmc_name_of_class(`, …).
fn declared_functions(header: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in header.lines() {
        let line = line.trim_start();
        if line.starts_with('#') || line.starts_with('*') || line.starts_with("/*") {
            continue;
        }
        let Some(open) = line.find('(') else { continue };
        let head = &line[..open];
        if !head.contains(char::is_whitespace) || head.contains('=') || head.contains("typedef") {
            continue;
        }
        let name = head.rsplit(|c: char| c.is_whitespace() || c == '*').next().unwrap_or("");
        if name.starts_with("pmc") {
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn pmu_events_on_the_simulator() {
    let out = run("client_pmu", Linkage::Shared, "sim");
    assert!(out.contains("branches 1000000\n") && out.ends_with("pmu ok\n"), "{out}");
    // The print functions write through the C library's stdout, in order with printf.
    // Every event whose name contains the filter, any case, as FreeBSD's strcasestr.
    let counters = out.split("-- counters\n").nth(1).and_then(|s| s.split("-- desc\n").next());
    let counters: Vec<&str> = counters.unwrap_or_default().lines().collect();
    assert!(counters.contains(&"\tBR_INST_RETIRED.ALL_BRANCHES"), "{out}");
    assert!(counters.iter().all(|l| l.starts_with("\tBR_INST_RETIRED.ALL_BRANCHES")), "{out}");
    assert!(out.contains("-- desc\nBR_INST_RETIRED.ALL_BRANCHES:\t"), "{out}");
    assert!(out.contains("-- full\nBR_INST_RETIRED.ALL_BRANCHES:\n\tdesc:"), "{out}");
}
