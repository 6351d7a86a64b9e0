//! Building and running the C clients of `c/libpmc/` and `c/libcpc/`: programs written against
//! the libraries' public headers, compiled with the system C compiler with every warning an
//! error, linked with the shared library (found at run time through an rpath) or with the
//! static archive, and run on a host (`PMC_HOST`). Each program checks its own results and
//! exits 0; it prints what it measured.
//!
//! # Finding the libraries
//!
//! `libpmc` and `libcpc` are dependencies of this package. Cargo compiles a dependency's
//! library with all its crate types (`rlib`, `cdylib`, `staticlib`) before it builds the tests
//! that depend on it, and leaves `libpmc.so`, `libpmc.a`, `libcpc.so` and `libcpc.a` next to
//! the test executables in `target/<profile>/deps`. So the clients take them from the directory
//! of the running test's own executable: they come from the same compilation as the code under
//! test and are never stale. (Not `target/<profile>` itself: what `cargo build` left there may
//! be older than the code under test.) If they are not there (an unusual layout), both are
//! built with `cargo build -p libpmc -p libcpc --lib` into a target directory of their own under
//! `target/<profile>/c-clients` — not the running cargo's, whose lock is held while tests run —
//! and those are used.
//!
//! The compiler is `$CC` (default `cc`), or `$CXX` where a test builds a client as C++.
#![cfg(unix)]

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The library a client is written against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Library {
    /// libpmc: `<pmc.h>`, `<pmclog.h>`, `<pmc_host.h>`; `libpmc.so`, `libpmc.a`.
    Pmc,
    /// libcpc: `<libcpc.h>`, `<libpctx.h>`; `libcpc.so`, `libcpc.a`.
    Cpc,
}

impl Library {
    /// The name after `lib` in the file names and after `-l`.
    pub fn name(self) -> &'static str {
        match self {
            Library::Pmc => "pmc",
            Library::Cpc => "cpc",
        }
    }

    /// The workspace package of the library.
    fn package(self) -> &'static str {
        match self {
            Library::Pmc => "libpmc",
            Library::Cpc => "libcpc",
        }
    }

    /// The directory of the library's public C headers (`libpmc/include`, `libcpc/include`).
    pub fn include_dir(self) -> PathBuf {
        workspace_dir().join(self.package()).join("include")
    }

    /// The directory of the clients' sources (`tests/c/libpmc`, `tests/c/libcpc`).
    fn source_dir(self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("c").join(self.package())
    }

    /// The built shared library (`libpmc.so`, `libcpc.so`).
    pub fn shared(self) -> PathBuf {
        library_dir().join(format!("lib{}.so", self.name()))
    }

    /// The built static archive (`libpmc.a`, `libcpc.a`).
    pub fn archive(self) -> PathBuf {
        library_dir().join(format!("lib{}.a", self.name()))
    }
}

/// How a client is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Linkage {
    /// `-lpmc` or `-lcpc` against the shared library, found at run time through an rpath.
    Shared,
    /// The static archive and the system libraries Rust's standard library needs.
    Static,
}

fn workspace_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().expect("tests/ is in the workspace").to_path_buf()
}

/// The directory holding `libpmc.so`, `libpmc.a`, `libcpc.so` and `libcpc.a` built from the
/// sources under test (see the module's documentation).
pub fn library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's own path");
        let deps = exe.parent().expect("the test executable's directory").to_path_buf();
        let all_there = ["libpmc.so", "libpmc.a", "libcpc.so", "libcpc.a"]
            .iter()
            .all(|file| deps.join(file).is_file());
        if all_there { deps } else { build_libraries() }
    })
}

/// Builds both libraries into a target directory of the clients' own; returns the directory
/// holding them.
fn build_libraries() -> PathBuf {
    let target = crate::target_dir().join("c-clients").join("libraries");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-p", "libpmc", "-p", "libcpc", "--lib", "--manifest-path"])
        .arg(workspace_dir().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("run cargo build for libpmc and libcpc");
    assert!(status.success(), "cargo build --lib of libpmc and libcpc failed");
    target.join("debug")
}

/// Compiles `c/<package>/<name>.c` as C99 (with `_GNU_SOURCE` for libcpc's clients, which use
/// POSIX and GNU extensions), once per test process and linkage; returns the executable.
pub fn build(library: Library, name: &str, linkage: Linkage) -> PathBuf {
    match library {
        Library::Pmc => build_with(library, name, linkage, &["-std=c99"], ""),
        Library::Cpc => build_with(library, name, linkage, &["-std=c99", "-D_GNU_SOURCE"], ""),
    }
}

/// Compiles `c/<package>/<name>.c` with the compiler options `language` (and `$CC`, or `cxx`
/// if not empty, as the compiler) once per test process, linkage and language, every warning
/// an error; returns the executable.
pub fn build_with(
    library: Library,
    name: &str,
    linkage: Linkage,
    language: &[&str],
    cxx: &str,
) -> PathBuf {
    let mut options: Vec<&str> = language.to_vec();
    options.extend(["-Wall", "-Wextra", "-Werror"]);
    compile(library, name, linkage, &options, cxx, &[])
}

/// How a C program of the man pages is built: as its page says (`cc file -lcpc` and, for
/// libpctx's functions, `-lpctx`), with only the warnings that are errors in C99 and later
/// (an implicitly declared function, an implicit int) as errors: a man page's program is not
/// written to this project's warning flags.
pub fn build_man_page_program(
    name: &str,
    linkage: Linkage,
    language: &[&str],
    cxx: &str,
    libraries: &[&str],
) -> PathBuf {
    let mut options: Vec<&str> = language.to_vec();
    if cxx.is_empty() {
        options.extend(["-Werror=implicit-function-declaration", "-Werror=implicit-int"]);
    }
    compile(Library::Cpc, name, linkage, &options, cxx, libraries)
}

/// Compiles `c/<package>/<name>.c` (`name` may hold a directory) with `options` and linked
/// against `libraries` (`-l` names; the library's own when empty), once per test process,
/// linkage and options. Tests running at once share it: compiling it twice into one path would
/// let one test run a file the other's linker is replacing. Each is compiled under a name of
/// this process and renamed into place, so test processes running at the same time never run a
/// half-written client.
fn compile(
    library: Library,
    name: &str,
    linkage: Linkage,
    options: &[&str],
    cxx: &str,
    libraries: &[&str],
) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let flavour: String = options
        .iter()
        .chain(libraries)
        .chain([&cxx])
        .flat_map(|o| o.chars())
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let stem = name.replace('/', "-");
    let key = format!("{}-{stem}-{linkage:?}-{flavour}", library.package()).to_lowercase();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(exe) = built.get(&key) {
        return exe.clone();
    }
    let source = library.source_dir().join(format!("{name}.c"));
    let out_dir = crate::target_dir().join("c-clients");
    std::fs::create_dir_all(&out_dir).expect("create the clients' directory");
    // One path per client, linkage and options: each test run rebuilds it (once), so old ones
    // do not pile up in the target directory.
    let exe = out_dir.join(&key);
    let scratch = out_dir.join(format!("{key}.{}", std::process::id()));
    let lib = library_dir();
    let cc = if cxx.is_empty() {
        std::env::var("CC").unwrap_or_else(|_| "cc".into())
    } else {
        cxx.into()
    };
    let mut command = Command::new(&cc);
    command.args(options).args(["-g", "-I"]).arg(library.include_dir());
    if !cxx.is_empty() {
        // A `.c` file is C to g++ unless told otherwise.
        command.args(["-x", "c++"]);
    }
    command.arg(&source);
    if !cxx.is_empty() {
        command.args(["-x", "none"]);
    }
    command.arg("-o").arg(&scratch);
    let own = [library.name()];
    let libraries = if libraries.is_empty() { &own[..] } else { libraries };
    match linkage {
        Linkage::Shared => {
            command.arg("-L").arg(lib);
            command.args(libraries.iter().map(|l| format!("-l{l}")));
            command.arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        Linkage::Static => {
            command.args(libraries.iter().map(|l| lib.join(format!("lib{l}.a"))));
            command.args(["-lpthread", "-ldl", "-lm"]);
        }
    }
    let output = command.output().unwrap_or_else(|e| panic!("run the C compiler {cc}: {e}"));
    assert!(
        output.status.success(),
        "compiling {} ({linkage:?}, {options:?}) failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&scratch, &exe).expect("move the client into place");
    built.insert(key, exe.clone());
    exe
}

/// Runs the client `exe` (`what` in messages) on `host` with `args`; fails the test unless it
/// exits 0; returns its standard output and standard error.
pub fn run_exe(exe: &Path, what: &str, host: &str, args: &[&str]) -> (String, String) {
    let mut command = Command::new(exe);
    command.args(args).env("PMC_HOST", host);
    for var in ["PMC_SIM_CPUS", "PMC_SIM_MODEL", "PMC_SIM_SEED"] {
        command.env_remove(var);
    }
    // cargo puts target/<profile> on LD_LIBRARY_PATH, which the loader searches before the
    // client's rpath, and a library left there by an earlier `cargo build` may be stale.
    command.env("LD_LIBRARY_PATH", library_dir());
    let output = command.output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{what} (PMC_HOST={host}) failed with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
    );
    // The executable stays: other tests of this process run it too (it is built once).
    println!("{what} (PMC_HOST={host}):\n{stdout}");
    (stdout, stderr)
}

/// Builds and runs client `name` of `library` on `host` with `args`; fails the test unless it
/// exits 0; returns its standard output and standard error.
pub fn run_with_stderr(
    library: Library,
    name: &str,
    linkage: Linkage,
    host: &str,
    args: &[&str],
) -> (String, String) {
    let exe = build(library, name, linkage);
    run_exe(&exe, &format!("{name} ({linkage:?})"), host, args)
}

/// The dynamic symbols `library`'s shared library defines (`nm -D --defined-only`), or `None`
/// if `nm` is not installed.
pub fn exported_symbols(library: Library) -> Option<BTreeSet<String>> {
    let output =
        Command::new("nm").arg("-D").arg("--defined-only").arg(library.shared()).output().ok()?;
    assert!(output.status.success(), "nm -D {}", library.shared().display());
    let symbols = String::from_utf8_lossy(&output.stdout);
    Some(symbols.lines().filter_map(|l| l.split_whitespace().nth(2)).map(String::from).collect())
}
