//! A run that fails never harms what the user named as an output (issue 33, item 1): every
//! file output (`-o`, `-O`, `-G`, `-F`, `-M`, `-g` under `-D`, `--folded`, `--flamegraph`,
//! `--pprof`, `--firefox`) is tried against a private null and full device (made with mknod(2) in a
//! temporary directory), a FIFO, a symbolic link to a file and a file that is already there,
//! under a mistyped event, a command that does not exist, a device that refuses writes and a
//! file-size limit. Afterwards each device is still a device, each link still a link and each
//! file that was there holds what it held.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hwpmc_tests::{Host, Run, arg, c_program, encode_log, pmcstat, pmcstat_binary, start_pmcstat};
use pmclog::{
    Callchain, CallchainFlags, DynLayout, MapIn, PmcAllocateDyn, ProgramCounters, Record,
};

const PMCID: u32 = 0x4000_0100;

/// What was at an output path before the run, to check after it.
enum Kind {
    /// A character device made here.
    Device,
    /// A FIFO made here.
    Fifo,
    /// A symbolic link to a file with this content.
    Link(Vec<u8>),
    /// A regular file with this content.
    File(Vec<u8>),
}

/// An output path of a test and what it was.
struct Place {
    path: PathBuf,
    kind: Kind,
}

fn null_device(dir: &Path, name: &str) -> Place {
    Place { path: hwpmc_tests::null_device(dir, name), kind: Kind::Device }
}

fn full_device(dir: &Path, name: &str) -> Place {
    Place { path: hwpmc_tests::full_device(dir, name), kind: Kind::Device }
}

fn fifo(dir: &Path, name: &str) -> Place {
    let path = dir.join(name);
    let c = std::ffi::CString::new(arg(&path)).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path, which lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    Place { path, kind: Kind::Fifo }
}

fn existing(dir: &Path, name: &str) -> Place {
    let path = dir.join(name);
    let content = format!("{name}: the user's own data, not pmcstat's\n").into_bytes();
    std::fs::write(&path, &content).unwrap();
    Place { path, kind: Kind::File(content) }
}

fn link(dir: &Path, name: &str) -> Place {
    let target = dir.join(format!("{name}.target"));
    let content = format!("{name}: the file a link points to\n").into_bytes();
    std::fs::write(&target, &content).unwrap();
    let path = dir.join(name);
    std::os::unix::fs::symlink(&target, &path).unwrap();
    Place { path, kind: Kind::Link(content) }
}

impl Place {
    fn arg(&self) -> &str {
        arg(&self.path)
    }

    /// Asserts that the run left the path as it was (`run` for the message).
    #[track_caller]
    fn assert_unharmed(&self, run: &Run) {
        let meta = std::fs::symlink_metadata(&self.path).unwrap_or_else(|e| {
            panic!("{} is gone ({e})\n{}", self.path.display(), run.describe())
        });
        let what =
            format!("{} after pmcstat {:?}\n{}", self.path.display(), run.args, run.describe());
        match &self.kind {
            Kind::Device => assert!(meta.file_type().is_char_device(), "not a device: {what}"),
            Kind::Fifo => assert!(meta.file_type().is_fifo(), "not a FIFO: {what}"),
            Kind::Link(content) => {
                assert!(meta.file_type().is_symlink(), "not a link: {what}");
                assert_eq!(&std::fs::read(&self.path).unwrap(), content, "changed: {what}");
            }
            Kind::File(content) => {
                assert!(meta.is_file(), "not a file: {what}");
                assert_eq!(&std::fs::read(&self.path).unwrap(), content, "changed: {what}");
            }
        }
    }
}

/// Makes a [`Place`] of a kind in a directory, with a name.
type MakePlace = fn(&Path, &str) -> Place;

/// Every file option of a sampling run, each pointing at a place made by `make` (named after
/// the option).
fn every_output(dir: &Path, make: MakePlace) -> Vec<(&'static str, Place)> {
    ["-o", "-O", "-G", "-F", "--folded", "--flamegraph", "--pprof", "--firefox"]
        .into_iter()
        .map(|option| (option, make(dir, &format!("out{option}"))))
        .collect()
}

#[test]
fn a_run_that_fails_before_measuring_leaves_every_output_as_it_was() {
    let makers: [(&str, MakePlace); 4] = [
        ("null device", null_device),
        ("full device", full_device),
        ("link", link),
        ("existing file", existing),
    ];
    for (what, make) in makers {
        for failure in ["mistyped event", "missing command"] {
            let dir = tempfile::tempdir().unwrap();
            let outputs = every_output(dir.path(), make);
            let event = if failure == "mistyped event" { "cpu-clocks-typo" } else { "cpu-clock" };
            let command =
                if failure == "missing command" { "/nonexistent/command" } else { "true" };
            let mut args = vec!["-P", event];
            for (option, place) in &outputs {
                args.extend([*option, place.arg()]);
            }
            args.extend(["--", command]);
            let run = pmcstat(Host::Linux, &args);
            assert!(run.status != 0 && run.status != 101, "{what}, {failure}: {}", run.describe());
            for (_, place) in &outputs {
                place.assert_unharmed(&run);
            }
            // Nothing else was left in the directory (no stub, no temporary file).
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| !n.ends_with(".target"))
                .collect();
            names.sort();
            let mut expected: Vec<String> =
                outputs.iter().map(|(o, _)| format!("out{o}")).collect();
            expected.sort();
            assert_eq!(names, expected, "{what}, {failure}");
        }
    }
}

/// A log of 40 samples in the `hot` program (mapped at 0x400000 in process 7) under names long
/// enough for every report to be well over a hundred bytes.
fn small_log(dir: &Path) -> PathBuf {
    let program = c_program("hot");
    let pcs = [0x401000u64, 0x401100, 0x401200];
    let sample = Record::Callchain(Callchain {
        pid: 7,
        tid: 8,
        pmcid: PMCID,
        cpuflags: CallchainFlags::new(0, 1),
        pcs: ProgramCounters::from_words(&pcs),
    });
    let mut records = vec![
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: PMCID,
            event: 0x1000,
            flags: 0,
            rate: 1000,
            name: b"cpu-clock",
            layout: DynLayout::Kernel,
        }),
        Record::MapIn(MapIn { pid: 7, start: 0x400000, path: arg(&program).as_bytes() }),
    ];
    records.extend(std::iter::repeat_n(sample, 40));
    let path = dir.join("small.log");
    std::fs::write(&path, encode_log(&records)).unwrap();
    path
}

/// A report (`-R log`) with `option` pointing at `place`; `-M` goes with `-g` and its gmon
/// files under `gmon`.
fn report_args<'a>(log: &'a str, option: &'a str, place: &'a str, gmon: &'a str) -> Vec<&'a str> {
    let mut args = vec!["-q", "-R", log];
    if option == "-M" {
        args.extend(["-g", "-D", gmon]);
    }
    args.extend([option, place]);
    args
}

const REPORT_OUTPUTS: [&str; 8] =
    ["-o", "-G", "-F", "-M", "--folded", "--flamegraph", "--pprof", "--firefox"];

#[test]
fn a_report_written_to_a_full_device_fails_and_the_device_stays() {
    let dir = tempfile::tempdir().unwrap();
    let log = small_log(dir.path());
    for option in REPORT_OUTPUTS {
        let full = full_device(dir.path(), &format!("full{option}"));
        let gmon = dir.path().join("gmon");
        let args = report_args(arg(&log), option, full.arg(), arg(&gmon));
        let run = pmcstat(Host::Linux, &args);
        run.assert_status(74);
        assert!(run.stderr.contains("No space left on device"), "{}", run.describe());
        full.assert_unharmed(&run);
    }
}

#[test]
fn a_report_to_a_null_device_or_a_fifo_is_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let log = small_log(dir.path());
    for option in REPORT_OUTPUTS {
        let null = null_device(dir.path(), &format!("null{option}"));
        let gmon = dir.path().join("gmon");
        let args = report_args(arg(&log), option, null.arg(), arg(&gmon));
        let run = pmcstat(Host::Linux, &args);
        run.assert_status(0);
        null.assert_unharmed(&run);

        // A FIFO whose reader takes everything.
        let fifo = fifo(dir.path(), &format!("fifo{option}"));
        let path = fifo.path.clone();
        let reader = std::thread::spawn(move || std::fs::read(path).unwrap());
        let args = report_args(arg(&log), option, fifo.arg(), arg(&gmon));
        let run = start_pmcstat(Host::Linux, &args).finish_within(Duration::from_secs(60));
        run.assert_status(0);
        assert!(!reader.join().unwrap().is_empty(), "{option}: nothing came through the FIFO");
        fifo.assert_unharmed(&run);
    }
}

/// pmcstat with `args`, whose writes to files beyond `limit` bytes fail (RLIMIT_FSIZE, with
/// SIGXFSZ ignored: the write returns EFBIG).
fn pmcstat_with_file_limit(args: &[&str], limit: u64) -> Run {
    let mut command = Command::new(pmcstat_binary());
    command.args(args).env("PMC_HOST", "linux").env("RUST_BACKTRACE", "1");
    // SAFETY: between fork and exec only async-signal-safe calls (signal, setrlimit).
    unsafe {
        command.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let rlimit = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = command.output().unwrap();
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn a_report_that_cannot_be_written_leaves_an_existing_file_and_a_link_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let log = small_log(dir.path());
    for option in REPORT_OUTPUTS {
        for make in [existing as MakePlace, link] {
            let place = make(dir.path(), &format!("out{option}"));
            let gmon = dir.path().join("gmon");
            let args = report_args(arg(&log), option, place.arg(), arg(&gmon));
            // Each report is longer than 16 bytes; the log and program are only read.
            let run = pmcstat_with_file_limit(&args, 16);
            assert_eq!(run.status, 74, "{option}\n{}", run.describe());
            assert!(run.stderr.contains("File too large"), "{option}\n{}", run.describe());
            place.assert_unharmed(&run);
            std::fs::remove_file(&place.path).unwrap();
            let _ = std::fs::remove_file(dir.path().join(format!("out{option}.target")));
        }
    }
}

#[test]
fn a_report_replaces_an_existing_file_and_the_file_a_link_points_to() {
    let dir = tempfile::tempdir().unwrap();
    let log = small_log(dir.path());
    let file = existing(dir.path(), "folded.txt");
    let linked = link(dir.path(), "linked.txt");
    let args = ["-q", "-R", arg(&log), "--folded", file.arg()];
    pmcstat(Host::Linux, &args).assert_status(0);
    let args = ["-q", "-R", arg(&log), "--folded", linked.arg()];
    let run = pmcstat(Host::Linux, &args);
    run.assert_status(0);
    let folded = std::fs::read_to_string(&file.path).unwrap();
    assert!(folded.ends_with(" 40\n"), "{folded}");
    assert!(std::fs::symlink_metadata(&linked.path).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&linked.path).unwrap(), folded);
}

#[test]
fn a_measurement_logs_to_a_null_device_and_replaces_an_existing_log() {
    let dir = tempfile::tempdir().unwrap();
    let null = null_device(dir.path(), "null");
    let log = existing(dir.path(), "old.log");
    let args = ["-P", "cpu-clock", "-O", null.arg(), "-o", null.arg(), "--", "true"];
    let run = pmcstat(Host::Linux, &args);
    run.assert_status(0);
    null.assert_unharmed(&run);
    let run = pmcstat(Host::Linux, &["-P", "cpu-clock", "-O", log.arg(), "--", "true"]);
    run.assert_status(0);
    let bytes = std::fs::read(&log.path).unwrap();
    let first = pmclog::Records::new(&bytes).next().unwrap().unwrap();
    assert!(matches!(first.record, Record::Initialize(_)), "{:?}", first.record);
}

#[test]
fn a_gmon_file_that_cannot_be_written_keeps_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let log = small_log(dir.path());
    let gmon = dir.path().join("gmon");
    let args = ["-q", "-R", arg(&log), "-g", "-D", arg(&gmon)];
    pmcstat(Host::Linux, &args).assert_status(0);
    let written = hwpmc_tests::files_under(&gmon);
    assert_eq!(written.len(), 1, "{written:?}");
    let file = gmon.join(&written[0]);
    let content = b"an older gmon file the user keeps\n".to_vec();
    std::fs::write(&file, &content).unwrap();
    let run = pmcstat_with_file_limit(&args, 16);
    assert_eq!(run.status, 74, "{}", run.describe());
    Place { path: file, kind: Kind::File(content) }.assert_unharmed(&run);
}
