//! Fixtures of the profile engine's tests and benchmarks (`tools/pmcprof`) and of pmcstat's: a
//! small C program built with gcc, whose functions and source lines the tests know, and logs
//! written with pmclog's encoder that sample it. A crate of its own that depends on nothing of
//! the workspace but pmclog, so that pmcprof and pmcstat can dev-depend on it without a cycle
//! (the end-to-end test crate depends on pmcstat).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSymbol};
use pmclog::{
    Callchain, CallchainFlags, Initialize, MapIn, PmcAllocate, ProcExec, ProgramCounters, Record,
};

/// `INSTR_RETIRED_ANY`.
pub const INSTR_RETIRED_ANY: u32 = 0x10000;
/// `CPU_CLK_UNHALTED_CORE`.
pub const CPU_CLK_UNHALTED_CORE: u32 = 0x10001;

/// The C source of the test program: `main` calls `warm` (which calls `hot`) and `cold`.
pub const SOURCE: &str = r#"
volatile int sink;
__attribute__((noinline)) int hot(int x) {
    int s = 0;
    for (int i = 0; i < x * 1000; i++) s += i ^ x;
    return s;
}
__attribute__((noinline)) int warm(int x) { return hot(x) + 1; }
__attribute__((noinline)) int cold(int x) { return x * 3; }
int main(int argc, char **argv) { (void)argv; sink = warm(argc) + cold(argc); return 0; }
"#;

/// A compiled program in its own temporary directory.
pub struct Program {
    /// Keeps the directory alive.
    pub _dir: tempfile::TempDir,
    /// The executable.
    pub path: PathBuf,
    /// Function name → (link-time address, size).
    pub functions: HashMap<String, (u64, u64)>,
    /// The C source it was built from.
    pub source: PathBuf,
    /// Whether the executable was stripped after `functions` were read from it.
    pub stripped: bool,
}

impl Program {
    /// Builds the test program, a position-dependent (`-no-pie`) or a PIE (`-pie`) executable.
    pub fn build(pie: bool) -> Program {
        Program::build_with(pie, &[])
    }

    /// Builds the test program with DWARF (`-g`): source files and lines.
    pub fn build_with_lines(pie: bool) -> Program {
        Program::build_with(pie, &["-g"])
    }

    /// Builds the test program with DWARF, linked by `linker` (`gcc -fuse-ld=LINKER`: `lld`,
    /// `mold`, `bfd`), stripped of its symbol table if `stripped` (the functions stay those of
    /// the unstripped build). `None`, after saying why on standard error, if the linker is not
    /// installed (Debian packages `lld`, `mold`).
    pub fn build_linked(linker: &str, pie: bool, stripped: bool) -> Option<Program> {
        if linker != "bfd" && !linker_installed(linker) {
            return None;
        }
        let use_linker = format!("-fuse-ld={linker}");
        let mut program = Program::build_with(pie, &["-g", &use_linker]);
        if stripped {
            let status = Command::new("strip")
                .arg("--strip-all")
                .arg(&program.path)
                .status()
                .expect("run strip");
            assert!(status.success(), "strip failed");
            program.stripped = true;
        }
        Some(program)
    }

    /// Where the Linux host says an image is when it is loaded `bias` bytes from its link-time
    /// addresses: as perf's mmap record of its executable segment gives it, the mapping's start
    /// minus its file offset (the address of file offset 0 if the file were mapped whole).
    pub fn map_in_start(path: &Path, bias: u64) -> u64 {
        use object::ObjectSegment;
        let data = std::fs::read(path).expect("read the program");
        let file = object::File::parse(&*data).expect("parse the program");
        let code = file
            .segments()
            .find(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0))
            .expect("an executable segment");
        let page = |a: u64| a & !0xfff;
        bias + page(code.address()) - page(code.file_range().0)
    }

    fn build_with(pie: bool, flags: &[&str]) -> Program {
        let dir = tempfile::tempdir().expect("temporary directory");
        let source = dir.path().join("prog.c");
        std::fs::write(&source, SOURCE).expect("write the C source");
        let path = dir.path().join("prog");
        let mode: &[&str] = if pie { &["-fPIE", "-pie"] } else { &["-fno-pie", "-no-pie"] };
        let status = Command::new("gcc")
            .args(["-O0", "-fno-omit-frame-pointer"])
            .args(mode)
            .args(flags)
            .arg("-o")
            .arg(&path)
            .arg(&source)
            .status()
            .expect("run gcc");
        assert!(status.success(), "gcc failed");
        let functions = functions_of(&path);
        Program { _dir: dir, path, functions, source, stripped: false }
    }

    /// The source line of the link-time address `address`, as binutils' `addr2line` reads the
    /// program's DWARF (the line of the function the address is in, for inlined code).
    pub fn line_of(&self, address: u64) -> u32 {
        let output = Command::new("addr2line")
            .arg("-e")
            .arg(&self.path)
            .arg(format!("{address:#x}"))
            .output()
            .expect("run addr2line");
        let text = String::from_utf8(output.stdout).expect("UTF-8");
        let position = text.trim().split(" (discriminator").next().unwrap_or_default();
        let line = position.rsplit(':').next().unwrap_or_default();
        line.parse().unwrap_or_else(|_| panic!("addr2line said {text:?}"))
    }

    /// The log's name for the program.
    pub fn log_path(&self) -> &str {
        self.path.to_str().expect("UTF-8 temporary path")
    }

    /// A link-time address `offset` bytes into `function`.
    pub fn at(&self, function: &str, offset: u64) -> u64 {
        let (start, size) = self.functions[function];
        assert!(offset < size, "{function} is only {size} bytes");
        start + offset
    }
}

/// Function symbols of an ELF file, read with `object` (as `nm` would list them).
pub fn functions_of(path: &Path) -> HashMap<String, (u64, u64)> {
    let data = std::fs::read(path).expect("read the program");
    let file = object::File::parse(&*data).expect("parse the program");
    file.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition())
        .filter_map(|s| Some((s.name().ok()?.to_owned(), (s.address(), s.size()))))
        .collect()
}

/// A log under construction.
pub struct LogBuilder {
    bytes: Vec<u8>,
    tsc: u64,
}

impl Default for LogBuilder {
    fn default() -> Self {
        LogBuilder::new()
    }
}

impl LogBuilder {
    /// A log that starts with INITIALIZE (TSC at 1 GHz, configured at 1000 s + 5 ns).
    pub fn new() -> LogBuilder {
        let mut log = LogBuilder { bytes: Vec::new(), tsc: 0 };
        log.push(&Record::Initialize(Initialize {
            version: 0x0A00_0000,
            cpu_type: 0x98,
            tsc_freq: 1_000_000_000,
            time_sec: 1000,
            time_nsec: 5,
            cpuid: b"GenuineIntel-6-55",
        }));
        log
    }

    /// Appends a record; returns its offset.
    pub fn push(&mut self, record: &Record<'_>) -> u64 {
        let offset = self.bytes.len() as u64;
        let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
        let len = pmclog::encode(record, self.tsc, &mut buf).expect("encode");
        self.bytes.extend_from_slice(&buf[..len]);
        self.tsc += 1000;
        offset
    }

    /// PMCALLOCATE of a static event.
    pub fn allocate(&mut self, pmcid: u32, event: u32) -> &mut Self {
        self.push(&Record::PmcAllocate(PmcAllocate { pmcid, event, flags: 0x10, rate: 65536 }));
        self
    }

    /// PROCEXEC.
    pub fn exec(&mut self, pid: i32, path: &str, base: u64, dynamic: u64) -> &mut Self {
        self.push(&Record::ProcExec(ProcExec {
            pid,
            pmcid: 0,
            base_addr: base,
            dyn_addr: dynamic,
            path: path.as_bytes(),
        }));
        self
    }

    /// MAP_IN.
    pub fn map_in(&mut self, pid: i32, start: u64, path: &str) -> &mut Self {
        self.push(&Record::MapIn(MapIn { pid, start, path: path.as_bytes() }));
        self
    }

    /// `times` user-mode CALLCHAIN records with the program counters `pcs`.
    pub fn samples(&mut self, pid: i32, pmcid: u32, pcs: &[u64], times: u32) -> &mut Self {
        self.samples_mode(pid, pmcid, true, pcs, times)
    }

    /// `times` CALLCHAIN records taken in user (`user`) or kernel mode.
    pub fn samples_mode(
        &mut self,
        pid: i32,
        pmcid: u32,
        user: bool,
        pcs: &[u64],
        times: u32,
    ) -> &mut Self {
        for _ in 0..times {
            self.push(&Record::Callchain(Callchain {
                pid,
                tid: pid + 1,
                pmcid,
                cpuflags: CallchainFlags::new(1, u16::from(user)),
                pcs: ProgramCounters::from_words(pcs),
            }));
        }
        self
    }

    /// The log's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}

/// The log most tests use: pid 100 runs the (non-PIE) program `p`, PMC 0x100 counts
/// INSTR_RETIRED_ANY, and its samples are
/// 6 × hot ← warm ← main, 3 × warm ← main, 1 × hot ← main (10 samples).
pub fn hot_warm_main(p: &Program) -> LogBuilder {
    let mut log = LogBuilder::new();
    log.allocate(0x100, INSTR_RETIRED_ANY).exec(100, p.log_path(), 0, 0);
    log.samples(100, 0x100, &[p.at("hot", 4), p.at("warm", 10), p.at("main", 20)], 6);
    log.samples(100, 0x100, &[p.at("warm", 4), p.at("main", 20)], 3);
    log.samples(100, 0x100, &[p.at("hot", 8), p.at("main", 30)], 1);
    log
}

/// Whether the linker `gcc -fuse-ld=NAME` runs is installed; if not, says so on standard error
/// (the test that asked is then skipped: Debian packages `lld`, `mold`).
pub fn linker_installed(name: &str) -> bool {
    let command = if name == "lld" { "ld.lld" } else { name };
    let found = Command::new(command).arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: {command} is not installed (apt-get install {name})");
    }
    found
}

/// `go tool pprof ARGS FILE`'s standard output (Go's own pprof reader, independent of ours);
/// `None` (with a note) where Go is not installed, except under CI, which installs it.
pub fn go_pprof(args: &[&str], file: &Path) -> Option<String> {
    let output = match Command::new("go").args(["tool", "pprof"]).args(args).arg(file).output() {
        Ok(output) => output,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("go tool pprof not run ({e}): install golang-go");
            return None;
        }
        Err(e) => panic!("CI installs golang-go: {e}"),
    };
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    Some(String::from_utf8(output.stdout).unwrap())
}
