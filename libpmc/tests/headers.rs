//! The C headers in `libpmc/include` against the Rust definitions they must equal.
//!
//! * `tests/c/layout.c`, built with the system C compiler, prints the size, and every member's
//!   offset, size and signedness, of every structure of `<sys/pmc.h>`, `<pmc.h>` and `<pmclog.h>`,
//!   and the value of every constant. The same facts are computed here with `size_of` and
//!   `offset_of!` on `hwpmc::abi` and `pmclog::capi` and with the Rust constants; the two lists
//!   must be equal line for line. Padding the Rust structs spell out (`pm_pad`) must be padding
//!   in C too.
//! * Neither list can leave anything out: each Rust struct is destructured without `..`, no
//!   `#[repr(C)]` type of `driver/src/abi.rs` or `pmclog/src/capi.rs` may be missing, and a small
//!   declaration scanner checks that layout.c prints every member the headers declare.
//! * `tests/c/records.c` reads records the Rust encoder wrote through the on-disk structures of
//!   `<sys/pmclog.h>`.
//! * `tests/c/pedantic.c` and each header alone compile without a warning as ISO C and C++, and
//!   every pmc(3)/pmclog(3) prototype has FreeBSD's exact signature.
//!
//! The compilers are `$CC` (default `cc`) and `$CXX` (default `c++`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use hwpmc::Errno;
use hwpmc::abi::{self, Caps, Class, Disposition, Mode, Op, PmcFlags, PmcId, State};
use hwpmc::regs::PerfEvtSel;
use pmclog::capi;
use pmclog::{
    Callchain, CallchainFlags, DynLayout, Initialize, MapIn, MapOut, PmcAllocate, PmcAllocateDyn,
    PmcAttach, PmcDetach, ProcCreate, ProcCsw, ProcExec, ProcExit, ProcFork, ProgramCounters,
    Record, RecordType, SysExit, ThrCreate, ThrExit, UserData,
};
use zerocopy::IntoBytes;

// ---------------------------------------------------------------------------------------------
// Building and running the C programs.

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(name)
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

fn cxx() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".into())
}

/// A directory of its own for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("libpmc-headers-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the test's temporary directory");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs `compiler args…`, failing the test with the compiler's messages if it does not succeed.
fn compile(compiler: &str, args: &[&str]) {
    let output = Command::new(compiler)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{compiler}`: {e}"));
    assert!(
        output.status.success(),
        "`{compiler} {}` failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds `tests/c/<source>` into `dir` with the warnings-as-errors flags plus `extra`.
fn build(dir: &TempDir, source: &str, extra: &[&str]) -> PathBuf {
    let exe = dir.path(source.trim_end_matches(".c"));
    let include = include_dir();
    let src = c_source(source);
    let mut args = vec!["-Wall", "-Wextra", "-Werror"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "-I",
        include.to_str().expect("UTF-8 path"),
        src.to_str().expect("UTF-8 path"),
        "-o",
        exe.to_str().expect("UTF-8 path"),
    ]);
    compile(&cc(), &args);
    exe
}

/// Runs a program and returns its standard output.
fn run(exe: &Path, args: &[&Path]) -> String {
    let output = Command::new(exe).args(args).output().expect("run the C program");
    assert!(
        output.status.success(),
        "{} failed ({}):\n{}",
        exe.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the C program prints UTF-8")
}

/// Fails with the lines only one side has.
fn assert_same_lines(c: &BTreeSet<String>, rust: &BTreeSet<String>, what: &str) {
    let only_c: Vec<_> = c.difference(rust).collect();
    let only_rust: Vec<_> = rust.difference(c).collect();
    assert!(
        only_c.is_empty() && only_rust.is_empty(),
        "{what}: the C headers and the Rust definitions differ\n\
         only in C ({}):\n  {}\nonly in Rust ({}):\n  {}",
        only_c.len(),
        only_c.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        only_rust.len(),
        only_rust.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
    );
}

// ---------------------------------------------------------------------------------------------
// The Rust side of the layout facts.

/// Signedness of a member type: `Some(true)` for signed integers, `Some(false)` for unsigned
/// ones, `None` for arrays, structs, unions and pointers (which C prints no signedness for).
trait Kind {
    const SIGNED: Option<bool>;
}

macro_rules! kind {
    ($($t:ty => $signed:expr),* $(,)?) => {
        $(impl Kind for $t {
            const SIGNED: Option<bool> = $signed;
        })*
    };
}

kind!(
    u16 => Some(false),
    u32 => Some(false),
    u64 => Some(false),
    usize => Some(false),
    i32 => Some(true),
    i64 => Some(true),
    abi::PmcMdOpPmcAllocate => None,
    libc::timespec => None,
    capi::pmclog_ev_u => None,
);

impl<T, const N: usize> Kind for [T; N] {
    const SIGNED: Option<bool> = None;
}

impl<T> Kind for *const T {
    const SIGNED: Option<bool> = None;
}

impl<T> Kind for *mut T {
    const SIGNED: Option<bool> = None;
}

/// Size and signedness of the member `get` selects.
fn field<S, F: Kind>(_get: fn(&S) -> &F) -> (usize, Option<bool>) {
    (size_of::<F>(), F::SIGNED)
}

/// Padding a Rust struct spells out as a member and C leaves implicit.
struct Pad {
    c_struct: &'static str,
    name: &'static str,
    offset: usize,
    size: usize,
}

/// What the Rust definitions say, in layout.c's line format.
#[derive(Default)]
struct Facts {
    lines: BTreeSet<String>,
    consts: BTreeMap<String, u32>,
    pads: Vec<Pad>,
    /// The Rust types covered, for [`every_rust_abi_type_is_checked`].
    rust_types: BTreeSet<&'static str>,
    /// The union members listed, per Rust union.
    union_members: BTreeMap<&'static str, Vec<&'static str>>,
}

impl Facts {
    fn size(&mut self, c: &str, size: usize) {
        self.lines.insert(format!("sizeof {c} {size}"));
    }

    fn member(
        &mut self,
        c: &str,
        member: &str,
        offset: usize,
        (size, signed): (usize, Option<bool>),
    ) {
        self.lines.insert(format!("offsetof {c}.{member} {offset}"));
        self.lines.insert(format!("fieldsize {c}.{member} {size}"));
        if let Some(signed) = signed {
            self.lines.insert(format!("signed {c}.{member} {}", u8::from(signed)));
        }
    }

    fn flex(&mut self, c: &str, member: &str, offset: usize, element: usize) {
        self.lines.insert(format!("offsetof {c}.{member} {offset}"));
        self.lines.insert(format!("elemsize {c}.{member} {element}"));
    }

    /// A constant; naming one twice is fine only with the same value.
    fn constant(&mut self, name: impl Into<String>, value: u32) {
        let name = name.into();
        if let Some(old) = self.consts.insert(name.clone(), value) {
            assert_eq!(old, value, "two Rust values for {name}");
        }
    }
}

/// The layout facts of a Rust struct under its C name. Every field must be listed (the pattern
/// has no `..`); `pad { … }` lists the fields that are implicit padding in C.
macro_rules! layout {
    ($facts:ident, $c:literal, $($path:ident)::+ { $($field:ident),* $(,)? } $(pad { $($pad:ident),* })?) => {{
        #[allow(dead_code, clippy::unused_unit)]
        fn every_field_is_listed(value: &$($path)::+) {
            let $($path)::+ { $($field: _,)* $($($pad: _,)*)? } = value;
        }
        type T = $($path)::+;
        $facts.size($c, size_of::<T>());
        $( $facts.member($c, stringify!($field), offset_of!(T, $field), field(|s: &T| &s.$field)); )*
        $($( $facts.pads.push(Pad {
            c_struct: $c,
            name: stringify!($pad),
            offset: offset_of!(T, $pad),
            size: field(|s: &T| &s.$pad).0,
        }); )*)?
        $facts.rust_types.insert(last_segment(stringify!($($path)::+)));
    }};
}

/// The layout facts of a Rust union of structs under its C name; each member is given with its
/// type (which the compiler checks by building the union from it).
macro_rules! union_layout {
    ($facts:ident, $c:literal, $($path:ident)::+ { $($field:ident : $fty:ty),* $(,)? }) => {{
        type T = $($path)::+;
        $facts.size($c, size_of::<T>());
        $(
            let _: fn($fty) -> T = |x| T { $field: x };
            $facts.member($c, stringify!($field), offset_of!(T, $field), (size_of::<$fty>(), None));
        )*
        let name = last_segment(stringify!($($path)::+));
        $facts.rust_types.insert(name);
        $facts.union_members.insert(name, vec![$(stringify!($field)),*]);
    }};
}

fn last_segment(path: &'static str) -> &'static str {
    path.rsplit("::").next().unwrap_or(path).trim()
}

/// `union pmc_md_op_pmcallocate`. The Rust type keeps the 32 bytes opaque behind accessors, so
/// where each C member sits is found by filling the bytes with their own offsets and seeing what
/// each accessor reads.
fn md_union_facts(f: &mut Facts) {
    const C: &str = "pmc_md_op_pmcallocate";
    let mut md = abi::PmcMdOpPmcAllocate::default();
    for (i, byte) in md.as_mut_bytes().iter_mut().enumerate() {
        *byte = i as u8;
    }
    // The offset a value was read from, after checking it is `size` consecutive bytes.
    let at = |value: u64, size: usize| -> usize {
        let offset = (value & 0xFF) as usize;
        let mut expected = [0u8; 8];
        for (i, b) in expected.iter_mut().take(size).enumerate() {
            *b = (offset + i) as u8;
        }
        assert_eq!(value, u64::from_le_bytes(expected), "accessor reads {size} consecutive bytes");
        offset
    };
    let (ibs_flag, ibs_type, ibs_ctl, ibs_ctl2) = md.ibs();
    // (union member, [(its field, what the accessor read, the field's size)])
    type Fields<'a> = &'a [(&'a str, u64, usize)];
    let members: [(&str, Fields<'_>); 5] = [
        (
            "pm_amd",
            &[
                ("pm_amd_config", md.amd_config(), 8),
                ("pm_amd_sub_class", md.amd_sub_class().into(), 4),
            ],
        ),
        (
            "pm_ibs",
            &[
                ("ibs_flag", ibs_flag.into(), 4),
                ("ibs_type", ibs_type.into(), 4),
                ("ibs_ctl", ibs_ctl, 8),
                ("ibs_ctl2", ibs_ctl2, 8),
            ],
        ),
        (
            "pm_iap",
            &[("pm_iap_config", md.iap_config().into(), 4), ("pm_iap_rsp", md.iap_rsp(), 8)],
        ),
        ("pm_ucf", &[("pm_ucf_flags", md.ucf_flags().into(), 2)]),
        ("pm_ucp", &[("pm_ucp_config", md.ucp_config().into(), 4)]),
    ];
    f.size(C, size_of::<abi::PmcMdOpPmcAllocate>());
    for (member, fields) in members {
        // C's layout of a struct of these unsigned scalars: its size is the end of its last
        // field rounded up to its largest field.
        let mut end = 0;
        let mut align = 1;
        for &(name, value, size) in fields {
            let offset = at(value, size);
            f.member(C, &format!("{member}.{name}"), offset, (size, Some(false)));
            end = end.max(offset + size);
            align = align.max(size);
        }
        f.member(C, member, 0, (end.div_ceil(align) * align, None));
    }
    f.member(C, "__pad", 0, (size_of::<abi::PmcMdOpPmcAllocate>(), None));
    f.rust_types.insert("PmcMdOpPmcAllocate");
}

fn struct_facts(f: &mut Facts) {
    layout!(f, "pmc_op_pmcallocate", abi::PmcOpPmcAllocate {
        pm_caps, pm_cpu, pm_class, pm_ev, pm_flags, pm_mode, pm_pmcid, pm_count, pm_md,
    } pad { pm_pad });
    md_union_facts(f);
    layout!(f, "pmc_op_pmcadmin", abi::PmcOpPmcAdmin { pm_cpu, pm_flags, pm_pmc, pm_state });
    layout!(f, "pmc_op_pmcattach", abi::PmcOpPmcAttach { pm_pmc, pm_pid });
    layout!(f, "pmc_op_pmcsetcount", abi::PmcOpPmcSetCount { pm_count, pm_pmcid } pad { pm_pad });
    layout!(f, "pmc_op_pmcrw", abi::PmcOpPmcRw { pm_flags, pm_pmcid, pm_value });
    layout!(f, "pmc_op_pmcreadtimes", abi::PmcOpPmcReadTimes {
        pm_pmcid, pm_value, pm_enabled, pm_running,
    } pad { pm_pad });
    layout!(f, "pmc_info", abi::PmcInfo {
        pm_name, pm_class, pm_enabled, pm_rowdisp, pm_ownerpid, pm_mode, pm_event, pm_flags,
        pm_reloadcount,
    } pad { pm_pad });
    for c in ["pmc_op_getpmcinfo", "pmc_pmcinfo"] {
        // `struct pmc_info pm_pmcs[]` follows the fixed head.
        f.flex(c, "pm_pmcs", size_of::<abi::PmcOpGetPmcInfo>(), size_of::<abi::PmcInfo>());
    }
    layout!(f, "pmc_op_getpmcinfo", abi::PmcOpGetPmcInfo { pm_cpu } pad { pm_pad });
    layout!(f, "pmc_pmcinfo", abi::PmcOpGetPmcInfo { pm_cpu } pad { pm_pad });
    layout!(f, "pmc_classinfo", abi::PmcClassInfo { pm_class, pm_caps, pm_width, pm_num });
    layout!(
        f,
        "pmc_op_getcpuinfo",
        abi::PmcOpGetCpuInfo { pm_cputype, pm_ncpu, pm_npmc, pm_nclass, pm_classes }
    );
    layout!(
        f,
        "pmc_cpuinfo",
        abi::PmcOpGetCpuInfo { pm_cputype, pm_ncpu, pm_npmc, pm_nclass, pm_classes }
    );
    layout!(f, "pmc_op_configurelog", abi::PmcOpConfigureLog { pm_flags, pm_logfd });
    layout!(
        f,
        "pmc_op_getdriverstats",
        abi::PmcOpGetDriverStats {
            pm_intr_ignored,
            pm_intr_processed,
            pm_intr_bufferfull,
            pm_syscalls,
            pm_syscall_errors,
            pm_buffer_requests,
            pm_buffer_requests_failed,
            pm_log_sweeps,
        }
    );
    layout!(
        f,
        "pmc_driverstats",
        abi::PmcOpGetDriverStats {
            pm_intr_ignored,
            pm_intr_processed,
            pm_intr_bufferfull,
            pm_syscalls,
            pm_syscall_errors,
            pm_buffer_requests,
            pm_buffer_requests_failed,
            pm_log_sweeps,
        }
    );
    layout!(f, "pmc_op_simple", abi::PmcOpSimple { pm_pmcid });
    layout!(f, "pmc_op_writelog", abi::PmcOpWriteLog { pm_userdata });
    layout!(f, "pmc_op_getmsr", abi::PmcOpGetMsr { pm_msr, pm_pmcid });
    layout!(f, "pmc_dyn_event_descr", abi::PmcDynEventDescr { pm_ev_name, pm_ev_code });
    layout!(
        f,
        "pmc_op_getdyneventinfo",
        abi::PmcOpGetDynEventInfo { pm_class, pm_nevent, pm_events }
    );
    layout!(f, "pmc_op_caps", abi::PmcOpCaps { pm_pmcid, pm_caps });

    layout!(
        f,
        "pmclog_ev",
        capi::pmclog_ev { pl_state, pl_offset, pl_count, pl_ts, pl_type, pl_data, pl_len, pl_u }
    );
    union_layout!(
        f,
        "pmclog_ev_u",
        capi::pmclog_ev_u {
            pl_cc: capi::pmclog_ev_callchain,
            pl_cl: capi::pmclog_ev_closelog,
            pl_dn: capi::pmclog_ev_dropnotify,
            pl_i: capi::pmclog_ev_initialize,
            pl_mi: capi::pmclog_ev_map_in,
            pl_mo: capi::pmclog_ev_map_out,
            pl_a: capi::pmclog_ev_pmcallocate,
            pl_ad: capi::pmclog_ev_pmcallocatedyn,
            pl_t: capi::pmclog_ev_pmcattach,
            pl_d: capi::pmclog_ev_pmcdetach,
            pl_c: capi::pmclog_ev_proccsw,
            pl_pc: capi::pmclog_ev_proccreate,
            pl_x: capi::pmclog_ev_procexec,
            pl_e: capi::pmclog_ev_procexit,
            pl_f: capi::pmclog_ev_procfork,
            pl_se: capi::pmclog_ev_sysexit,
            pl_tc: capi::pmclog_ev_threadcreate,
            pl_te: capi::pmclog_ev_threadexit,
            pl_u: capi::pmclog_ev_userdata,
        }
    );
    layout!(
        f,
        "pmclog_ev_callchain",
        capi::pmclog_ev_callchain {
            pl_pid,
            pl_tid,
            pl_pmcid,
            pl_cpuflags,
            pl_cpuflags2,
            pl_npc,
            pl_pc,
        }
    );
    layout!(f, "pmclog_ev_closelog", capi::pmclog_ev_closelog {});
    layout!(f, "pmclog_ev_dropnotify", capi::pmclog_ev_dropnotify {});
    layout!(
        f,
        "pmclog_ev_initialize",
        capi::pmclog_ev_initialize { pl_version, pl_arch, pl_tsc_freq, pl_ts, pl_cpuid }
    );
    layout!(f, "pmclog_ev_map_in", capi::pmclog_ev_map_in { pl_pid, pl_start, pl_pathname });
    layout!(f, "pmclog_ev_map_out", capi::pmclog_ev_map_out { pl_pid, pl_start, pl_end });
    layout!(
        f,
        "pmclog_ev_pmcallocate",
        capi::pmclog_ev_pmcallocate { pl_evname, pl_rate, pl_event, pl_flags, pl_pmcid }
    );
    layout!(
        f,
        "pmclog_ev_pmcallocatedyn",
        capi::pmclog_ev_pmcallocatedyn { pl_evname, pl_event, pl_flags, pl_pmcid }
    );
    layout!(f, "pmclog_ev_pmcattach", capi::pmclog_ev_pmcattach { pl_pmcid, pl_pid, pl_pathname });
    layout!(f, "pmclog_ev_pmcdetach", capi::pmclog_ev_pmcdetach { pl_pmcid, pl_pid });
    layout!(f, "pmclog_ev_proccsw", capi::pmclog_ev_proccsw { pl_pid, pl_tid, pl_pmcid, pl_value });
    layout!(f, "pmclog_ev_proccreate", capi::pmclog_ev_proccreate { pl_pid, pl_flags, pl_pcomm });
    layout!(
        f,
        "pmclog_ev_procexec",
        capi::pmclog_ev_procexec { pl_pid, pl_pmcid, pl_baseaddr, pl_dynaddr, pl_pathname }
    );
    layout!(f, "pmclog_ev_procexit", capi::pmclog_ev_procexit { pl_pid, pl_pmcid, pl_value });
    layout!(f, "pmclog_ev_procfork", capi::pmclog_ev_procfork { pl_oldpid, pl_newpid });
    layout!(f, "pmclog_ev_sysexit", capi::pmclog_ev_sysexit { pl_pid });
    layout!(
        f,
        "pmclog_ev_threadcreate",
        capi::pmclog_ev_threadcreate { pl_tid, pl_pid, pl_flags, pl_tdname }
    );
    layout!(f, "pmclog_ev_threadexit", capi::pmclog_ev_threadexit { pl_tid });
    layout!(f, "pmclog_ev_userdata", capi::pmclog_ev_userdata { pl_userdata });
}

/// The static event blocks: the class prefix of an event's C name.
fn event_block(code: u32) -> &'static str {
    match code {
        0x1000..0x2000 => "TSC",
        0x2000..0x2080 => "IBS",
        0x2080..0x2100 => "K8",
        0x10000..0x10080 => "IAF",
        0x14700..0x14800 => "RAPL",
        _ => panic!("static event {code:#x} is in no known block"),
    }
}

fn constant_facts(f: &mut Facts) {
    f.constant("PMC_VERSION_MAJOR", abi::PMC_VERSION_MAJOR);
    f.constant("PMC_VERSION_MINOR", abi::PMC_VERSION >> 16 & 0xFF);
    f.constant("PMC_VERSION_PATCH", abi::PMC_VERSION & 0xFFFF);
    f.constant("PMC_VERSION", abi::PMC_VERSION);
    assert_eq!(abi::PMC_VERSION_MAJOR, pmclog::names::PMC_VERSION_MAJOR);

    for op in Op::ALL {
        f.constant(format!("PMC_OP_{}", format!("{op:?}").to_uppercase()), op.as_u32());
    }
    f.constant("PMC_OP_PMCREADTIMES", abi::PMC_OP_PMCREADTIMES);

    for class in Class::ALL {
        f.constant(format!("PMC_CLASS_{}", class.name()), class.as_u32());
    }
    let classes = Class::ALL.iter().map(|c| c.as_u32());
    f.constant("PMC_CLASS_FIRST", classes.clone().min().expect("classes"));
    f.constant("PMC_CLASS_LAST", classes.max().expect("classes"));

    for mode in Mode::ALL {
        let name = match mode {
            Mode::SystemSampling => "SS",
            Mode::SystemCounting => "SC",
            Mode::ThreadSampling => "TS",
            Mode::ThreadCounting => "TC",
        };
        f.constant(format!("PMC_MODE_{name}"), mode.as_u32());
    }
    f.constant("PMC_MODE_FIRST", Mode::ALL.iter().map(|m| m.as_u32()).min().expect("modes"));
    f.constant("PMC_MODE_LAST", Mode::ALL.iter().map(|m| m.as_u32()).max().expect("modes"));

    for state in State::ALL {
        f.constant(format!("PMC_STATE_{}", format!("{state:?}").to_uppercase()), state.as_u32());
    }
    // FreeBSD's enum ends with PMC_STATE_MAX, one past the last state, and calls it LAST.
    let state_max = State::ALL.iter().map(|s| s.as_u32()).max().expect("states") + 1;
    f.constant("PMC_STATE_MAX", state_max);
    f.constant("PMC_STATE_FIRST", State::ALL.iter().map(|s| s.as_u32()).min().expect("states"));
    f.constant("PMC_STATE_LAST", state_max);

    for disp in Disposition::ALL {
        f.constant(format!("PMC_DISP_{}", format!("{disp:?}").to_uppercase()), disp.as_u32());
    }
    // FreeBSD's range leaves UNKNOWN out.
    f.constant("PMC_DISP_FIRST", Disposition::Standalone.as_u32());
    f.constant("PMC_DISP_LAST", Disposition::Thread.as_u32());

    for (name, cap) in Caps::all().iter_names() {
        f.constant(format!("PMC_CAP_{name}"), cap.bits());
    }
    f.constant("PMC_CAP_FIRST", 1 << Caps::all().bits().trailing_zeros());
    f.constant("PMC_CAP_LAST", 1 << (31 - Caps::all().bits().leading_zeros()));

    for (name, flag) in PmcFlags::all().iter_names() {
        f.constant(format!("PMC_F_{name}"), flag.bits());
    }
    f.constant("PMC_CC_F_USERSPACE", CallchainFlags::USERSPACE);
    f.constant("PMC_CC_F_MULTIPART", CallchainFlags::MULTIPART);

    let cpu_types: Vec<(u32, &str)> = (0..0x10000)
        .filter_map(|code| pmclog::names::cpu_type_name(code).map(|name| (code, name)))
        .collect();
    for &(code, name) in &cpu_types {
        f.constant(format!("PMC_CPU_{name}"), code);
    }
    // The driver's own list agrees with the names table.
    f.constant("PMC_CPU_AMD_K8", abi::cpu_type::AMD_K8);
    f.constant("PMC_CPU_INTEL_CORE2", abi::cpu_type::INTEL_CORE2);
    f.constant("PMC_CPU_INTEL_SKYLAKE", abi::cpu_type::INTEL_SKYLAKE);
    f.constant("PMC_CPU_INTEL_SKYLAKE_XEON", abi::cpu_type::INTEL_SKYLAKE_XEON);
    f.constant("PMC_CPU_GENERIC", abi::cpu_type::GENERIC);
    f.constant("PMC_CPU_FIRST", cpu_types.iter().map(|c| c.0).min().expect("cpu types"));
    f.constant("PMC_CPU_LAST", cpu_types.iter().map(|c| c.0).max().expect("cpu types"));

    let mut blocks: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for code in abi::event::FIRST..abi::event::SOFT_FIRST {
        if let Some(name) = pmclog::names::event_name(code) {
            let block = event_block(code);
            // FreeBSD's names are PMC_EV_<block>_<event>; the IBS names carry the block already.
            let c_name = if name.starts_with(&format!("{block}_")) {
                format!("PMC_EV_{name}")
            } else {
                format!("PMC_EV_{block}_{name}")
            };
            f.constant(c_name, code);
            let range = blocks.entry(block).or_insert((code, code));
            range.0 = range.0.min(code);
            range.1 = range.1.max(code);
        }
    }
    for (block, (first, last)) in blocks {
        f.constant(format!("PMC_EV_{block}_FIRST"), first);
        f.constant(format!("PMC_EV_{block}_LAST"), last);
    }
    f.constant("PMC_EV_TSC_TSC", abi::event::TSC_TSC);
    f.constant("PMC_EV_IAF_INSTR_RETIRED_ANY", abi::event::IAF_INSTR_RETIRED_ANY);
    f.constant("PMC_EV_IAF_CPU_CLK_UNHALTED_CORE", abi::event::IAF_CPU_CLK_UNHALTED_CORE);
    f.constant("PMC_EV_IAF_CPU_CLK_UNHALTED_REF", abi::event::IAF_CPU_CLK_UNHALTED_REF);
    f.constant("PMC_EV_SOFT_FIRST", abi::event::SOFT_FIRST);
    f.constant("PMC_EV_SOFT_LAST", abi::event::SOFT_LAST);
    f.constant("PMC_EV_SOFT_FIRST", pmclog::names::EVENT_SOFT_FIRST);
    f.constant("PMC_EV_SOFT_LAST", pmclog::names::EVENT_SOFT_LAST);
    f.constant("PMC_EV_DYN_COUNT", abi::PMC_EV_DYN_COUNT as u32);
    f.constant("PMC_EVENT_FIRST", abi::event::FIRST);
    f.constant("PMC_EVENT_LAST", abi::event::LAST);

    f.constant("PMC_CPU_ANY", abi::PMC_CPU_ANY);
    f.constant("PMC_ID_INVALID", abi::PMC_ID_INVALID);
    f.constant("PMC_NAME_MAX", abi::PMC_NAME_MAX as u32);
    f.constant("PMC_NAME_MAX", capi::PMC_NAME_MAX as u32);
    f.constant("PMC_CLASS_MAX", abi::PMC_CLASS_MAX as u32);
    f.constant("PMC_CPUID_LEN", abi::PMC_CPUID_LEN as u32);
    f.constant("PMC_CPUID_LEN", pmclog::CPUID_LEN as u32);
    f.constant("PMC_CALLCHAIN_DEPTH_MAX", abi::PMC_CALLCHAIN_DEPTH_MAX as u32);
    f.constant("PMC_CALLCHAIN_DEPTH_MAX", capi::PMC_CALLCHAIN_DEPTH_MAX as u32);

    f.constant("IAP_EVSEL(~0U)", PerfEvtSel::EVENT_SELECT as u32);
    f.constant("IAP_UMASK(~0U)", PerfEvtSel::UMASK as u32);
    f.constant("IAP_USR", PerfEvtSel::USR as u32);
    f.constant("IAP_OS", PerfEvtSel::OS as u32);
    f.constant("IAP_EDGE", PerfEvtSel::EDGE as u32);
    f.constant("IAP_INT", PerfEvtSel::INT as u32);
    f.constant("IAP_ANY", PerfEvtSel::ANY as u32);
    f.constant("IAP_EN", PerfEvtSel::EN as u32);
    f.constant("IAP_INV", PerfEvtSel::INV as u32);
    f.constant("IAP_CMASK(~0U)", PerfEvtSel::CMASK as u32);

    let log_types = [
        ("CLOSELOG", capi::PMCLOG_TYPE_CLOSELOG),
        ("DROPNOTIFY", capi::PMCLOG_TYPE_DROPNOTIFY),
        ("INITIALIZE", capi::PMCLOG_TYPE_INITIALIZE),
        ("MAPPINGCHANGE", capi::PMCLOG_TYPE_MAPPINGCHANGE),
        ("PMCALLOCATE", capi::PMCLOG_TYPE_PMCALLOCATE),
        ("PMCATTACH", capi::PMCLOG_TYPE_PMCATTACH),
        ("PMCDETACH", capi::PMCLOG_TYPE_PMCDETACH),
        ("PROCCSW", capi::PMCLOG_TYPE_PROCCSW),
        ("PROCEXEC", capi::PMCLOG_TYPE_PROCEXEC),
        ("PROCEXIT", capi::PMCLOG_TYPE_PROCEXIT),
        ("PROCFORK", capi::PMCLOG_TYPE_PROCFORK),
        ("SYSEXIT", capi::PMCLOG_TYPE_SYSEXIT),
        ("USERDATA", capi::PMCLOG_TYPE_USERDATA),
        ("MAP_IN", capi::PMCLOG_TYPE_MAP_IN),
        ("MAP_OUT", capi::PMCLOG_TYPE_MAP_OUT),
        ("CALLCHAIN", capi::PMCLOG_TYPE_CALLCHAIN),
        ("PMCALLOCATEDYN", capi::PMCLOG_TYPE_PMCALLOCATEDYN),
        ("THR_CREATE", capi::PMCLOG_TYPE_THR_CREATE),
        ("THR_EXIT", capi::PMCLOG_TYPE_THR_EXIT),
        ("PROC_CREATE", capi::PMCLOG_TYPE_PROC_CREATE),
    ];
    for (name, code) in log_types {
        f.constant(format!("PMCLOG_TYPE_{name}"), code);
    }
    // The C API's constants are the record types of the format.
    for record_type in RecordType::ALL {
        f.constant(format!("PMCLOG_TYPE_{}", record_type.name()), record_type.code().into());
    }

    f.constant("PMCLOG_OK", capi::PMCLOG_OK);
    f.constant("PMCLOG_EOF", capi::PMCLOG_EOF);
    f.constant("PMCLOG_REQUIRE_DATA", capi::PMCLOG_REQUIRE_DATA);
    f.constant("PMCLOG_ERROR", capi::PMCLOG_ERROR);
    f.constant("PMCLOG_FD_NONE", capi::PMCLOG_FD_NONE as u32);
    f.constant("PMCLOG_HEADER_MAGIC", pmclog::HEADER_MAGIC.into());
    f.constant("PMCLOG_PATH_MAX", pmclog::PATH_MAX as u32);
    f.constant("PMCLOG_COMM_LEN", pmclog::COMM_LEN as u32);
    f.constant("PMCLOG_COMM_LEN", (capi::MAXCOMLEN + 1) as u32);

    let (doofus, mismatch) = freebsd_errnos();
    f.constant("EDOOFUS", doofus as u32);
    f.constant("EPROGMISMATCH", mismatch as u32);
}

/// EDOOFUS and EPROGMISMATCH as libpmc reports them: FreeBSD's own numbers on FreeBSD, and
/// 0x100 plus them elsewhere (outside every Linux errno).
fn freebsd_errnos() -> (i32, i32) {
    let (doofus, mismatch) = (Errno::Doofus.freebsd(), Errno::ProgMismatch.freebsd());
    if cfg!(target_os = "freebsd") {
        (doofus, mismatch)
    } else {
        (0x100 + doofus, 0x100 + mismatch)
    }
}

fn rust_facts() -> Facts {
    let mut f = Facts::default();
    struct_facts(&mut f);
    constant_facts(&mut f);
    let consts = std::mem::take(&mut f.consts);
    for (name, value) in consts {
        f.lines.insert(format!("const {name} {value}"));
    }
    f
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn structs_and_constants_match_the_rust_definitions() {
    let dir = TempDir::new("layout");
    let exe = build(&dir, "layout.c", &["-std=gnu99", "-Wno-type-limits"]);
    let output = run(&exe, &[]);
    let rust = rust_facts();

    let mut c = BTreeSet::new();
    let mut ids = Vec::new();
    let mut modes = Vec::new();
    let mut strerror = Vec::new();
    for line in output.lines() {
        match line.split_whitespace().next() {
            Some("id") => ids.push(line),
            Some("mode") => modes.push(line),
            Some("strerror") => strerror.push(line),
            _ => {
                assert!(c.insert(line.to_owned()), "layout.c printed `{line}` twice");
            }
        }
    }
    assert_same_lines(&c, &rust.lines, "layout and constants");

    // Padding the Rust structs name is padding in C: no C member overlaps it.
    let mut c_members: BTreeMap<(&str, &str), (usize, usize)> = BTreeMap::new();
    for line in &c {
        let mut words = line.split_whitespace();
        let (Some(kind), Some(member), Some(value)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Some((s, m)) = member.split_once('.') else { continue };
        let value: usize = value.parse().expect("a number");
        let entry = c_members.entry((s, m)).or_default();
        match kind {
            "offsetof" => entry.0 = value,
            "fieldsize" | "elemsize" => entry.1 = value,
            _ => {}
        }
    }
    for pad in &rust.pads {
        assert!(
            !c_members.contains_key(&(pad.c_struct, pad.name)),
            "{}.{} is padding in Rust but a member in C",
            pad.c_struct,
            pad.name
        );
        for (&(s, m), &(offset, size)) in &c_members {
            let overlaps = offset < pad.offset + pad.size && pad.offset < offset + size.max(1);
            assert!(
                s != pad.c_struct || m.contains('.') || !overlaps,
                "C member {s}.{m} overlaps the Rust padding {}.{} at {}",
                pad.c_struct,
                pad.name,
                pad.offset
            );
        }
    }

    // PMC_ID_MAKE_ID and PMC_ID_TO_* pack and unpack as hwpmc::abi::PmcId does.
    assert!(ids.len() >= 6, "layout.c printed too few ids:\n{output}");
    for line in ids {
        let n: Vec<u32> =
            line.split_whitespace().skip(1).take(4).map(|w| w.parse().expect("a number")).collect();
        let id = PmcId {
            cpu: (n[0] != 0xFFF).then_some(n[0] as u16),
            mode: Mode::from_u32(n[1]).expect("a mode"),
            class: Class::from_u32(n[2]).expect("a class"),
            row: n[3] as u8,
        };
        let packed = id.to_u32();
        let back = PmcId::from_u32(packed).expect("the id unpacks");
        let expected = format!(
            "id {} {} {} {} = {packed} cpu {} mode {} class {} row {}",
            n[0],
            n[1],
            n[2],
            n[3],
            back.cpu.map_or(0xFFF, u32::from),
            back.mode.as_u32(),
            back.class.as_u32(),
            back.row
        );
        assert_eq!(line, expected);
    }

    // PMC_IS_*_MODE agree with Mode's predicates.
    assert_eq!(modes.len(), Mode::ALL.len());
    for (line, mode) in modes.iter().zip(Mode::ALL) {
        let expected = format!(
            "mode {} system {} virtual {} sampling {} counting {}",
            mode.as_u32(),
            u8::from(mode.is_system()),
            u8::from(mode.is_virtual()),
            u8::from(mode.is_sampling()),
            u8::from(!mode.is_sampling())
        );
        assert_eq!(*line, expected);
    }

    // The FreeBSD errnos collide with nothing the C library knows.
    #[cfg(target_os = "linux")]
    {
        let (doofus, mismatch) = freebsd_errnos();
        assert!(doofus > libc::EHWPOISON && mismatch > libc::EHWPOISON);
        #[cfg(target_env = "gnu")]
        for line in &strerror {
            assert!(line.contains("Unknown error"), "the C library knows this errno: {line}");
        }
    }
    assert_eq!(strerror.len(), 2);
}

#[test]
fn every_rust_abi_type_is_checked() {
    let facts = rust_facts();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut declared = BTreeSet::new();
    for file in ["driver/src/abi.rs", "pmclog/src/capi.rs"] {
        let source = fs::read_to_string(root.join(file)).expect("read the Rust source");
        declared.extend(repr_c_types(&source));
    }
    let missing: Vec<_> =
        declared.iter().filter(|t| !facts.rust_types.contains(t.as_str())).collect();
    assert!(missing.is_empty(), "Rust ABI types the header test does not check: {missing:?}");
    // And the source scan finds every type checked, so it does not miss declarations.
    let unseen: Vec<_> = facts.rust_types.iter().filter(|t| !declared.contains(**t)).collect();
    assert!(unseen.is_empty(), "checked types the source scan did not find: {unseen:?}");

    // Every member of the Rust unions is listed.
    let capi = fs::read_to_string(root.join("pmclog/src/capi.rs")).expect("read capi.rs");
    let body = capi
        .split_once("pub union pmclog_ev_u {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .expect("pmclog_ev_u in capi.rs")
        .0;
    let members: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub ")?.split_once(':').map(|(name, _)| name))
        .collect();
    assert_eq!(facts.union_members["pmclog_ev_u"], members);
}

#[test]
fn layout_c_lists_every_header_member() {
    let dir = TempDir::new("members");
    let exe = build(&dir, "layout.c", &["-std=gnu99", "-Wno-type-limits"]);
    let output = run(&exe, &[]);

    // The members layout.c prints, per struct: `pm_iap.pm_iap_config` is a member of
    // pmc_md_op_pmcallocate and of the struct behind its member pm_iap.
    let mut printed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in output.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("sizeof"), Some(s)) => {
                printed.entry(s.to_owned()).or_default();
            }
            (Some("offsetof"), Some(member)) => {
                let (s, path) = member.split_once('.').expect("struct.member");
                let (top, nested) = path.split_once('.').unwrap_or((path, ""));
                printed.entry(s.to_owned()).or_default().insert(top.to_owned());
                if !nested.is_empty() {
                    let inner = format!("pmc_md_{}_op_pmcallocate", top.trim_start_matches("pm_"));
                    printed.entry(inner).or_default().insert(nested.to_owned());
                }
            }
            _ => {}
        }
    }

    let mut scanned = BTreeSet::new();
    for header in ["pmc.h", "pmclog.h", "sys/pmc.h"] {
        let text = fs::read_to_string(include_dir().join(header)).expect("read the header");
        for (tag, members) in declared_members(&text) {
            scanned.insert(tag.clone());
            let Some(listed) = printed.get(&tag) else {
                panic!("layout.c does not print {tag} of {header}");
            };
            assert_eq!(&members, listed, "members of {tag} in {header} and in layout.c");
        }
    }
    let unscanned: Vec<_> = printed.keys().filter(|tag| !scanned.contains(*tag)).collect();
    assert!(unscanned.is_empty(), "the header scan missed {unscanned:?}");
}

/// The members of each struct and union a header defines (tag → member names), from a small
/// C declaration scanner: comments and preprocessor lines are dropped, and a member's name is the
/// last identifier of its declaration before any `[`.
fn declared_members(header: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut text = String::new();
    let mut rest = header;
    while let Some(start) = rest.find("/*") {
        text.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("closed comment");
        rest = &rest[start + end + 2..];
    }
    text.push_str(rest);
    let mut code = String::new();
    let mut continued = false;
    for line in text.lines() {
        let directive = continued || line.trim_start().starts_with('#');
        continued = directive && line.trim_end().ends_with('\\');
        if !directive {
            code.push_str(line);
            code.push('\n');
        }
    }

    let mut tokens = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars.peek().filter(|c| c.is_alphanumeric() || **c == '_') {
                word.push(c);
                chars.next();
            }
            tokens.push(word);
        } else if c == '"' {
            chars.next();
            for c in chars.by_ref() {
                if c == '"' {
                    break;
                }
            }
            tokens.push("\"\"".into());
        } else {
            chars.next();
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
        }
    }

    let is_ident = |t: &str| t.starts_with(|c: char| c.is_alphabetic() || c == '_');
    let mut members: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // (the struct or union being defined, if the brace opened one; the declaration it is in)
    let mut stack: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let mut decl: Vec<String> = Vec::new();
    for token in tokens {
        match token.as_str() {
            "{" => {
                let record = match decl.as_slice() {
                    [.., kind, tag] if (kind == "struct" || kind == "union") && is_ident(tag) => {
                        members.entry(tag.clone()).or_default();
                        Some(tag.clone())
                    }
                    _ => None,
                };
                stack.push((record, std::mem::take(&mut decl)));
            }
            "}" => {
                let (_, outer) = stack.pop().expect("balanced braces");
                decl = outer;
                decl.push(token);
            }
            ";" => {
                if let Some((Some(record), _)) = stack.last() {
                    let before_array = decl.iter().position(|t| t == "[").unwrap_or(decl.len());
                    if let Some(name) = decl[..before_array].iter().rev().find(|t| is_ident(t)) {
                        members.get_mut(record).expect("open record").insert(name.clone());
                    }
                }
                decl.clear();
            }
            _ => decl.push(token),
        }
    }
    assert!(stack.is_empty(), "unbalanced braces");
    members
}

/// The `#[repr(C)]` structs and unions a Rust source declares, including those made by
/// `abi_struct!`.
fn repr_c_types(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let mut types = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if *line != "#[repr(C)]" && *line != "abi_struct! {" {
            continue;
        }
        let Some(decl) = lines[i + 1..]
            .iter()
            .find(|l| !l.starts_with("///") && !l.starts_with("#[") && !l.is_empty())
        else {
            continue;
        };
        let name = decl
            .trim_start_matches("pub ")
            .trim_start_matches("struct ")
            .trim_start_matches("union ")
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .next()
            .unwrap_or_default();
        if !name.is_empty() && !name.starts_with('$') {
            types.push(name.to_owned());
        }
    }
    types
}

/// One record of each type with distinct values, and the C struct that describes it.
fn sample_records() -> Vec<(&'static str, Record<'static>)> {
    static PCS: [u64; 3] = [0xFFFF_FFFF_8012_3456, 0x0000_0000_0040_1000, 0x7FFF_DEAD_BEEF];
    vec![
        (
            "pmclog_initialize",
            Record::Initialize(Initialize {
                version: abi::PMC_VERSION,
                cpu_type: abi::cpu_type::INTEL_SKYLAKE,
                tsc_freq: 0x1122_3344_5566_7788,
                time_sec: 0x0102_0304_0506_0708,
                time_nsec: 999_999_999,
                cpuid: b"GenuineIntel-6-55",
            }),
        ),
        (
            "pmclog_pmcallocate",
            Record::PmcAllocate(PmcAllocate {
                pmcid: 0xFFF3_0703,
                event: 0x10001,
                flags: 0x280,
                rate: 0xA1A2_A3A4_A5A6_A7A8,
            }),
        ),
        (
            "pmclog_pmcallocatedyn",
            Record::PmcAllocateDyn(PmcAllocateDyn {
                pmcid: 0xFFF2_0F01,
                event: 0x20003,
                flags: 0x2,
                rate: 0,
                name: b"CLOCK.PROF",
                layout: DynLayout::Documented,
            }),
        ),
        (
            "pmclog_pmcattach",
            Record::PmcAttach(PmcAttach { pmcid: 0xFFF3_0704, pid: 4321, path: b"/bin/sh" }),
        ),
        ("pmclog_pmcdetach", Record::PmcDetach(PmcDetach { pmcid: 0xFFF3_0705, pid: 4322 })),
        (
            "pmclog_proccsw",
            Record::ProcCsw(ProcCsw {
                value: 0xC1C2_C3C4_C5C6_C7C8,
                pmcid: 0xFFF3_0706,
                pid: 11,
                tid: 100_012,
            }),
        ),
        (
            "pmclog_procexec",
            Record::ProcExec(ProcExec {
                pid: 12,
                pmcid: 0xFFF3_0707,
                base_addr: 0x7F00_0000_1000,
                dyn_addr: 0x5555_5555_4000,
                path: b"/usr/bin/true",
            }),
        ),
        (
            "pmclog_procexit",
            Record::ProcExit(ProcExit {
                pmcid: 0xFFF3_0708,
                pid: 13,
                value: 0xE1E2_E3E4_E5E6_E7E8,
            }),
        ),
        ("pmclog_procfork", Record::ProcFork(ProcFork { old_pid: 14, new_pid: 15 })),
        ("pmclog_sysexit", Record::SysExit(SysExit { pid: 16 })),
        ("pmclog_userdata", Record::UserData(UserData { data: 0xDEAD_BEEF })),
        (
            "pmclog_map_in",
            Record::MapIn(MapIn {
                pid: -1,
                start: 0xFFFF_FFFF_8020_0000,
                path: b"/boot/kernel/kernel",
            }),
        ),
        ("pmclog_map_out", Record::MapOut(MapOut { pid: 17, start: 0x40_0000, end: 0x40_8000 })),
        (
            "pmclog_callchain",
            Record::Callchain(Callchain {
                pid: 18,
                tid: 100_018,
                pmcid: 0x0050_0601,
                cpuflags: CallchainFlags::new(5, CallchainFlags::USERSPACE as u16),
                pcs: ProgramCounters::from_words(&PCS),
            }),
        ),
        (
            "pmclog_threadcreate",
            Record::ThrCreate(ThrCreate {
                tid: 100_019,
                pid: 19,
                flags: 0x1000_0001,
                name: b"worker-1",
            }),
        ),
        ("pmclog_threadexit", Record::ThrExit(ThrExit { tid: 100_020 })),
        (
            "pmclog_proccreate",
            Record::ProcCreate(ProcCreate { pid: 21, flags: 0x0000_4000, comm: b"sh" }),
        ),
        ("pmclog_dropnotify", Record::DropNotify),
        ("pmclog_closelog", Record::CloseLog),
    ]
}

/// The size of a record's struct without its variable part: what `records.c` prints as `fixed`.
fn fixed_len(record: &Record<'_>) -> usize {
    let empty = match *record {
        Record::PmcAttach(r) => Record::PmcAttach(PmcAttach { path: b"", ..r }),
        Record::ProcExec(r) => Record::ProcExec(ProcExec { path: b"", ..r }),
        Record::MapIn(r) => Record::MapIn(MapIn { path: b"", ..r }),
        Record::Callchain(r) => {
            return pmclog::encoded_len(&Record::Callchain(Callchain {
                pcs: ProgramCounters::from_words(&[]),
                ..r
            }))
            .expect("encodable");
        }
        other => return pmclog::encoded_len(&other).expect("encodable"),
    };
    // An empty path still takes its NUL, padded to 4 bytes.
    pmclog::encoded_len(&empty).expect("encodable") - 4
}

/// The lines `records.c` prints for record number `n`.
fn record_lines(n: usize, record: &Record<'_>, tsc: u64, len: usize) -> Vec<String> {
    let t = record.record_type();
    let mut lines = vec![format!(
        "rec {n} header magic {} type {} length {len} tsc {tsc}",
        pmclog::HEADER_MAGIC,
        t.code()
    )];
    let mut u = |field: &str, value: u64| lines.push(format!("rec {n} {field} {value}"));
    let text = |b: &[u8]| format!("\"{}\"", String::from_utf8_lossy(b));
    let mut strings = Vec::new();
    match *record {
        Record::CloseLog | Record::DropNotify => {}
        Record::Initialize(r) => {
            u("pl_i.pl_version", r.version.into());
            u("pl_i.pl_cpu", r.cpu_type.into());
            u("pl_i.pl_tsc_freq", r.tsc_freq);
            u("pl_i.pl_ts.tv_sec", r.time_sec as u64);
            u("pl_i.pl_ts.tv_nsec", r.time_nsec as u64);
            strings.push(("pl_i.pl_cpuid", text(r.cpuid)));
        }
        Record::PmcAllocate(r) => {
            u("pl_a.pl_pmcid", r.pmcid.into());
            u("pl_a.pl_event", r.event.into());
            u("pl_a.pl_flags", r.flags.into());
            u("pl_a.pl_rate", r.rate);
        }
        Record::PmcAllocateDyn(r) => {
            u("pl_ad.pl_pmcid", r.pmcid.into());
            u("pl_ad.pl_event", r.event.into());
            u("pl_ad.pl_flags", r.flags.into());
            strings.push(("pl_ad.pl_evname", text(r.name)));
        }
        Record::PmcAttach(r) => {
            u("pl_t.pl_pmcid", r.pmcid.into());
            u("pl_t.pl_pid", (r.pid as u32).into());
            strings.push(("pl_t.pl_pathname", text(r.path)));
        }
        Record::PmcDetach(r) => {
            u("pl_d.pl_pmcid", r.pmcid.into());
            u("pl_d.pl_pid", (r.pid as u32).into());
        }
        Record::ProcCsw(r) => {
            u("pl_c.pl_value", r.value);
            u("pl_c.pl_pmcid", r.pmcid.into());
            u("pl_c.pl_pid", (r.pid as u32).into());
            u("pl_c.pl_tid", (r.tid as u32).into());
        }
        Record::ProcExec(r) => {
            u("pl_x.pl_pid", (r.pid as u32).into());
            u("pl_x.pl_pmcid", r.pmcid.into());
            u("pl_x.pl_baseaddr", r.base_addr);
            u("pl_x.pl_dynaddr", r.dyn_addr);
            strings.push(("pl_x.pl_pathname", text(r.path)));
        }
        Record::ProcExit(r) => {
            u("pl_e.pl_pmcid", r.pmcid.into());
            u("pl_e.pl_pid", (r.pid as u32).into());
            u("pl_e.pl_value", r.value);
        }
        Record::ProcFork(r) => {
            u("pl_f.pl_oldpid", (r.old_pid as u32).into());
            u("pl_f.pl_newpid", (r.new_pid as u32).into());
        }
        Record::SysExit(r) => u("pl_se.pl_pid", (r.pid as u32).into()),
        Record::UserData(r) => u("pl_u.pl_userdata", r.data.into()),
        Record::MapIn(r) => {
            u("pl_mi.pl_pid", (r.pid as u32).into());
            u("pl_mi.pl_start", r.start);
            strings.push(("pl_mi.pl_pathname", text(r.path)));
        }
        Record::MapOut(r) => {
            u("pl_mo.pl_pid", (r.pid as u32).into());
            u("pl_mo.pl_start", r.start);
            u("pl_mo.pl_end", r.end);
        }
        Record::Callchain(r) => {
            u("pl_cc.pl_pid", (r.pid as u32).into());
            u("pl_cc.pl_tid", (r.tid as u32).into());
            u("pl_cc.pl_pmcid", r.pmcid.into());
            u("pl_cc.pl_cpuflags", r.cpuflags.0.into());
            lines.push(format!(
                "rec {n} cpu {} user {}",
                r.cpuflags.cpu(),
                r.cpuflags.0 & CallchainFlags::USERSPACE
            ));
            for (i, pc) in r.pcs.iter().enumerate() {
                lines.push(format!("rec {n} pl_cc.pl_pc[{i}] {pc}"));
            }
        }
        Record::ThrCreate(r) => {
            u("pl_tc.pl_tid", (r.tid as u32).into());
            u("pl_tc.pl_pid", (r.pid as u32).into());
            u("pl_tc.pl_flags", r.flags.into());
            strings.push(("pl_tc.pl_tdname", text(r.name)));
        }
        Record::ThrExit(r) => u("pl_te.pl_tid", (r.tid as u32).into()),
        Record::ProcCreate(r) => {
            u("pl_pc.pl_pid", (r.pid as u32).into());
            u("pl_pc.pl_flags", r.flags.into());
            strings.push(("pl_pc.pl_pcomm", text(r.comm)));
        }
    }
    lines.extend(strings.into_iter().map(|(field, value)| format!("rec {n} {field} {value}")));
    lines
}

#[test]
fn on_disk_records_read_back_through_sys_pmclog_h() {
    let dir = TempDir::new("records");
    let exe = build(&dir, "records.c", &["-std=c99", "-pedantic"]);

    let records = sample_records();
    let covered: BTreeSet<_> = records.iter().map(|(_, r)| r.record_type()).collect();
    assert_eq!(covered.len(), RecordType::ALL.len(), "one sample record of each type");

    let mut log = Vec::new();
    let mut expected = vec![
        format!("fixed pmclog_header {}", pmclog::HEADER_LEN),
        format!("fixed pmclog_entry {}", pmclog::MAX_RECORD_LEN),
    ];
    for (n, (c_struct, record)) in records.iter().enumerate() {
        let tsc = 0x0BAD_C0DE_0000_0000 + n as u64;
        let mut buf = vec![0; pmclog::encoded_len(record).expect("encodable")];
        let len = pmclog::encode(record, tsc, &mut buf).expect("encodes");
        log.extend_from_slice(&buf[..len]);
        expected.push(format!("fixed {c_struct} {}", fixed_len(record)));
        expected.extend(record_lines(n + 1, record, tsc, len));
    }
    let file = dir.path("sample.log");
    fs::write(&file, &log).expect("write the log");

    let output = run(&exe, &[&file]);
    let c: BTreeSet<String> = output.lines().map(str::to_owned).collect();
    let rust: BTreeSet<String> = expected.into_iter().collect();
    assert_same_lines(&c, &rust, "on-disk records");
}

#[test]
fn headers_compile_cleanly_as_c_and_cxx() {
    let dir = TempDir::new("pedantic");
    let include = include_dir();
    let include = include.to_str().expect("UTF-8 path");
    let object = dir.path("pedantic.o");
    let object = object.to_str().expect("UTF-8 path");
    let strict = ["-Wall", "-Wextra", "-Werror", "-pedantic", "-I", include];

    // Each header on its own: it includes what it needs and nothing in it warns.
    for header in ["pmc.h", "pmclog.h", "sys/pmc.h", "sys/pmclog.h"] {
        let path = include_dir().join(header);
        let path = path.to_str().expect("UTF-8 path");
        for std in ["-std=c99", "-std=c11"] {
            let mut args = vec![std, "-fsyntax-only", "-x", "c"];
            args.extend_from_slice(&strict);
            args.push(path);
            compile(&cc(), &args);
        }
        for std in ["-std=c++98", "-std=c++11", "-std=c++17"] {
            let mut args = vec![std, "-fsyntax-only", "-x", "c++"];
            args.extend_from_slice(&strict);
            args.push(path);
            compile(&cxx(), &args);
        }
    }

    // Every prototype with FreeBSD's signature, and the macros, in both languages.
    let source = c_source("pedantic.c");
    let source = source.to_str().expect("UTF-8 path");
    for (compiler, std, lang) in [
        (cc(), "-std=c99", "c"),
        (cc(), "-std=c11", "c"),
        (cxx(), "-std=c++98", "c++"),
        (cxx(), "-std=c++11", "c++"),
        (cxx(), "-std=c++17", "c++"),
    ] {
        let mut args = vec![std, "-x", lang, "-c"];
        args.extend_from_slice(&strict);
        args.extend_from_slice(&[source, "-o", object]);
        compile(&compiler, &args);
    }
}
