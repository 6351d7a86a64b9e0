//! C programs written against libcpc's `<libcpc.h>` and `<libpctx.h>` (`c/libcpc/*.c`), compiled
//! as C99 with every warning an error, linked with `libcpc.so` (through an rpath) and with
//! `libcpc.a`, and run on the simulator and Linux hosts. Each program checks its own results and
//! exits 0. The libraries are those built from the sources under test, next to this test's
//! executable ([`hwpmc_tests::c_clients`] says how they are found).
#![cfg(target_os = "linux")]

use hwpmc_tests::c_clients::{self, Library, Linkage, run_exe};

/// Builds and runs libcpc's client `name` on `host` with `args`; fails the test unless it exits
/// 0; returns its standard output.
fn run(name: &str, linkage: Linkage, host: &str, args: &[&str]) -> String {
    run_with_stderr(name, linkage, host, args).0
}

/// [`run`], returning standard output and standard error.
fn run_with_stderr(name: &str, linkage: Linkage, host: &str, args: &[&str]) -> (String, String) {
    c_clients::run_with_stderr(Library::Cpc, name, linkage, host, args)
}

/// Builds libcpc's client `name` with the compiler options `language` (and `cxx`, if not empty,
/// as the compiler).
fn build_with(name: &str, linkage: Linkage, language: &[&str], cxx: &str) -> std::path::PathBuf {
    c_clients::build_with(Library::Cpc, name, linkage, language, cxx)
}

#[test]
fn a_simulated_program_is_counted_exactly_through_pctx_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_sim_count", linkage, "sim", &[]);
        assert!(out.contains("PAPI_tot_ins 10000000\n"), "{out}");
        assert!(out.contains("instr_retired.any 10000005\n"), "{out}");
    }
}

#[test]
fn both_threads_of_a_simulated_program_are_counted_through_pctx() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        // Main and a worker thread run hot; the worker is 5 blocks short when main exits.
        let out = run("cpc_sim_count", linkage, "sim", &["threads"]);
        assert!(out.starts_with("PAPI_tot_ins 17950000\nPAPI_br_ins 1795000\n"), "{out}");
    }
}

#[test]
fn amd_generic_events_are_listed_and_count_exactly_on_the_simulated_amd_models() {
    // cpc_walk_generic_events_all lists names sorted, each once.
    let zen = "generic PAPI_br_cn PAPI_br_ins PAPI_br_msp PAPI_l2_tca PAPI_l2_tcm PAPI_tlb_dm \
               PAPI_tlb_im PAPI_tot_cyc PAPI_tot_ins\n";
    let k10 = "generic PAPI_br_ins PAPI_br_msp PAPI_br_tkn PAPI_fad_ins PAPI_fml_ins \
               PAPI_fp_ops PAPI_fpu_idl PAPI_hw_int PAPI_l1_dca PAPI_l1_dcm PAPI_l1_ica \
               PAPI_l1_icm PAPI_l1_icr PAPI_l1_ldm PAPI_l1_stm PAPI_l2_dch PAPI_l2_dcm \
               PAPI_l2_dcr PAPI_l2_dcw PAPI_l2_ich PAPI_l2_icm PAPI_l2_ldm PAPI_l2_stm \
               PAPI_l2_tca PAPI_l2_tcm PAPI_l3_dcr PAPI_l3_icr PAPI_l3_ldm PAPI_l3_stm \
               PAPI_l3_tcm PAPI_l3_tcr PAPI_res_stl PAPI_stl_icy PAPI_tlb_dm PAPI_tlb_im \
               PAPI_tot_cyc PAPI_tot_ins\n";
    let counts = "PAPI_tot_ins 10000000\nPAPI_tot_cyc 12500000\nPAPI_br_msp 10000\n0xc2 1000000\n";
    for (model, interface, generics) in [
        ("zen4", "AMD Family 19h, 6 counters", zen),
        ("zen2", "AMD Family 17h, 6 counters", zen),
        ("k10", "AMD Family 10h, 4 counters", k10),
    ] {
        for linkage in [Linkage::Shared, Linkage::Static] {
            let out = run("cpc_amd_generics", linkage, "sim", &[model]);
            let mut lines = out.lines();
            let first = lines.next().unwrap_or_default();
            assert!(first.starts_with(interface), "{model}: {out}");
            let rest: String = lines.map(|l| format!("{l}\n")).collect();
            assert_eq!(rest, format!("{generics}{counts}"), "{model}");
        }
    }
}

/// What the default error handler prints for the first, handler-less failure.
const DEFAULT_HANDLER_LINE: &str = "libcpc: cpc_set_add_request: Unknown event\n";

#[test]
fn every_errno_and_subcode_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let (out, err) = run_with_stderr("cpc_errors", linkage, "sim", &[]);
        assert_eq!(out, "errors ok\n");
        assert!(err.starts_with(DEFAULT_HANDLER_LINE), "{err}");
    }
}

#[test]
fn every_errno_and_subcode_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let (out, err) = run_with_stderr("cpc_errors", linkage, "linux", &[]);
        assert_eq!(out, "errors ok\n");
        assert!(err.starts_with(DEFAULT_HANDLER_LINE), "{err}");
    }
}

#[test]
fn presets_restart_freezing_buffers_and_walkers_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_api", linkage, "sim", &[]);
        assert!(out.contains("PAPI_tot_ins 1000 -> 1000 (+0)\n"), "{out}");
        assert!(out.contains("after restart 7 9\n") && out.ends_with("api ok\n"), "{out}");
    }
}

#[test]
fn page_faults_of_the_calling_thread_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_api", linkage, "linux", &[]);
        assert!(out.ends_with("api ok\n"), "{out}");
    }
}

/// The function of the simulated `hot-cold` that holds `ip`.
fn hot_cold_function(ip: u64) -> String {
    let symbols = pmc::host::sim::symbols("/usr/sim/bin/hot-cold").expect("hot-cold's symbols");
    let found = symbols.iter().find(|(start, end, _)| (*start..*end).contains(&ip));
    found.map(|(_, _, name)| name.clone()).unwrap_or_else(|| format!("{ip:#x}?"))
}

/// The functions of the `ip` lines of an SMPL client's output.
fn sampled_functions(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("ip 0x"))
        .map(|hex| hot_cold_function(u64::from_str_radix(hex, 16).expect("a hex ip")))
        .collect()
}

#[test]
fn smpl_records_are_the_sampled_instruction_pointers_up_to_smpl_nrecs() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        // Every 1 000 000th of 10 000 000 instructions: 9 in hot, the last in cold.
        let out = run("cpc_smpl", linkage, "sim", &["100"]);
        assert!(out.starts_with("records 10\n"), "{out}");
        let mut expected = vec!["hot".to_string(); 9];
        expected.push("cold".into());
        assert_eq!(sampled_functions(&out), expected, "{out}");
        // Capped at smpl_nrecs: the first 8.
        let out = run("cpc_smpl", linkage, "sim", &["8"]);
        assert!(out.starts_with("records 8\n"), "{out}");
        assert_eq!(sampled_functions(&out), vec!["hot".to_string(); 8], "{out}");
    }
}

#[test]
fn an_smpl_request_signals_once_when_its_records_are_in_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_smpl", linkage, "sim", &["8", "notify"]);
        assert!(out.starts_with("records 8\n") && out.ends_with("\nsignals 1\n"), "{out}");
        // 10 samples never fill 100 records: no signal.
        let out = run("cpc_smpl", linkage, "sim", &["100", "notify"]);
        assert!(out.starts_with("records 10\n") && out.ends_with("\nsignals 0\n"), "{out}");
    }
}

#[test]
fn smpl_records_of_the_calling_thread_and_a_signal_when_they_are_in_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_smpl_self", linkage, "linux", &[]);
        assert!(out.starts_with("records 16 faults ") && out.lines().count() == 1, "{out}");
        let out = run("cpc_smpl_self", linkage, "linux", &["notify"]);
        assert!(out.starts_with("records 16 faults ") && out.ends_with("\nsignals 1\n"), "{out}");
    }
}

#[test]
fn an_overflow_handler_gets_a_signal_per_period_and_restarts_the_set_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_overflow", linkage, "linux", &[]);
        assert_eq!(out, "signals ok\n");
    }
}

#[test]
fn an_overflow_handler_restarts_the_set_and_counts_every_period_exactly_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        // 10 periods of 1 000 000 instructions; the last one ends with the program's last
        // block, so after the last restart the values are the presets again.
        let out = run("cpc_sim_overflow", linkage, "sim", &[]);
        assert_eq!(out, "signals 10\ninstructions 18446744073708551616\nbranches 0\n");
    }
    // AMD's counters too (overflow interrupts, not precise ones).
    let out = run("cpc_sim_overflow", Linkage::Shared, "sim", &["restart", "zen4"]);
    assert_eq!(out, "signals 10\ninstructions 18446744073708551616\nbranches 0\n");
}

#[test]
fn without_a_restart_the_set_stays_frozen_at_its_first_overflow_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_sim_overflow", linkage, "sim", &["norestart"]);
        assert_eq!(out, "signals 1\ninstructions 0\nbranches 100000\n");
    }
}

#[test]
fn a_preset_set_in_the_overflow_handler_gives_the_next_periods_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        // 5 × 1 000 000 + 2 × 2 000 000 instructions, then 1 000 000 of the third 2 000 000.
        let out = run("cpc_sim_overflow", linkage, "sim", &["preset"]);
        assert_eq!(out, "signals 7\ninstructions 18446744073708551616\nbranches 100000\n");
    }
}

/// Every function `libcpc.h` and `libpctx.h` declare `extern` is exported by `libcpc.so` (the
/// inline `pctx_set_events` calls the exported `libcpc_pctx_set_event`).
#[test]
fn the_shared_library_exports_every_declared_function() {
    let Some(exported) = c_clients::exported_symbols(Library::Cpc) else {
        eprintln!("nm is not installed; skipping");
        return;
    };
    let include = Library::Cpc.include_dir();
    let mut declared = Vec::new();
    for header in ["libcpc.h", "libpctx.h"] {
        let text = std::fs::read_to_string(include.join(header)).expect("read the header");
        // `extern <type> [*]name(` starts each declaration.
        for line in text.lines().filter(|l| l.starts_with("extern ") && l.contains('(')) {
            let head = line.split('(').next().unwrap_or_default();
            declared.push(head.rsplit([' ', '*']).next().unwrap_or_default().to_string());
        }
    }
    assert!(declared.len() > 50, "{declared:?}");
    let missing: Vec<&String> =
        declared.iter().filter(|n| !exported.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "declared but not exported: {missing:?}");
}

#[test]
fn threads_created_after_an_inheriting_bind_are_counted_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_inherit", linkage, "linux", &[]);
        assert!(out.starts_with("faults "), "{out}");
    }
}

#[test]
fn two_threads_count_their_own_page_faults_with_cpc_bind_curlwp_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_lwp", linkage, "linux", &[]);
        assert!(out.contains("toucher ") && out.contains("uninherited "), "{out}");
    }
}

#[test]
fn the_headers_build_as_strict_iso_c99_and_as_cxx() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let exe = build_with("cpc_header", linkage, &["-std=c99", "-pedantic"], "");
        let (out, _) = run_exe(&exe, "cpc_header (C99)", "sim", &[]);
        assert_eq!(out, "header ok\n");
    }
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    if std::process::Command::new(&cxx).arg("--version").output().is_err() {
        eprintln!("no C++ compiler ({cxx}); the C++ half is skipped");
        return;
    }
    let exe = build_with("cpc_header", Linkage::Shared, &["-x", "c++", "-std=c++11"], &cxx);
    let (out, _) = run_exe(&exe, "cpc_header (C++)", "sim", &[]);
    assert_eq!(out, "header ok\n");
}

/// `cpc_pctx_events`' lines for simulated program `program`, from both linkages (which agree).
fn pctx_events(program: &str) -> String {
    let shared = run("cpc_pctx_events", Linkage::Shared, "sim", &[program]);
    let fixed = run("cpc_pctx_events", Linkage::Static, "sim", &[program]);
    assert_eq!(shared, fixed, "both linkages see the same events");
    shared
}

#[test]
fn pctx_reports_the_fork_of_forker_with_its_pids_on_the_simulator() {
    // The child is not followed (illumos's libpctx leaves it to the fork handler): only the
    // parent's LWP 1 starts and ends; the parent's set counts its own 900 hot blocks.
    let out = pctx_events("forker");
    assert_eq!(
        out,
        "init_lwp P 1\nfork P 1\nchild new\nfini_lwp P 1\nPAPI_tot_ins 9000000\nexit P 1\n\
         status 0\nevents ok\n"
    );
}

#[test]
fn pctx_reports_the_lwps_of_threads_on_the_simulator() {
    // The worker (LWP 2) is created before it runs and is still live when main exits: the
    // process's end finishes both LWPs, then exits. The set on LWP 1 counts the process.
    let out = pctx_events("threads");
    assert_eq!(
        out,
        "init_lwp P 1\ninit_lwp P 2\nlwp_create P 2\nfini_lwp P 1\nPAPI_tot_ins 17950000\n\
         fini_lwp P 2\nexit P 1\nstatus 0\nevents ok\n"
    );
}

#[test]
fn pctx_reports_the_exec_of_execer_with_the_new_program_on_the_simulator() {
    // execer runs cold (1 000 000 instructions), then executes hot-cold (10 000 000): the old
    // image's LWP ends, exec names the new program, the new image's LWP 1 starts. The set,
    // bound before, stays bound across the exec and counts both images.
    let out = pctx_events("execer");
    assert_eq!(
        out,
        "init_lwp P 1\nfini_lwp P 1\nPAPI_tot_ins 1000000\nexec P 1\n\
         command /usr/sim/bin/hot-cold\ninit_lwp P 1\nfini_lwp P 1\nPAPI_tot_ins 11000000\n\
         exit P 1\nstatus 0\nevents ok\n"
    );
}

#[test]
fn pctx_reports_a_real_programs_thread_fork_exec_and_exit_on_the_linux_host() {
    // The target (the client itself) starts and joins a thread, forks a child (not followed:
    // the C API leaves forks to the fork handler), executes itself, and exits 5; ptrace stops
    // it at each, so the events come in this order.
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_pctx_linux", linkage, "linux", &[]);
        assert_eq!(
            out,
            "init_lwp P M\ninit_lwp P T\nlwp_create P T\nfini_lwp P T\nlwp_exit P T\n\
             fork P M\nchild new\nfini_lwp P M\nexec P M\ncommand self stage2\ninit_lwp P M\n\
             fini_lwp P M\nexit P M\nstatus 5\nevents ok\n"
        );
    }
}

#[test]
fn a_captured_process_is_traced_while_pctx_runs_and_let_go_after_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_pctx_linux", linkage, "linux", &["capture"]);
        assert_eq!(out, "capture ticks 2 tracer 0\n");
    }
}

/// Runs `exe` on `host` with `args` and the environment `env`; its exit status (`None` if a
/// signal ended it), standard output and standard error.
fn run_status(
    exe: &std::path::Path,
    host: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let mut command = std::process::Command::new(exe);
    command.args(args).env("PMC_HOST", host).envs(env.iter().copied());
    for var in ["PMC_SIM_CPUS", "PMC_SIM_MODEL", "PMC_SIM_SEED", "EVENT", "EVENT0", "EVENT1"] {
        if !env.iter().any(|(k, _)| *k == var) {
            command.env_remove(var);
        }
    }
    command.env("LD_LIBRARY_PATH", c_clients::library_dir());
    let output = command.output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

/// The C++ compiler, if there is one.
fn cxx() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let found = std::process::Command::new(&cxx).arg("--version").output().is_ok();
    if !found {
        eprintln!("no C++ compiler ({cxx}); the C++ builds are skipped");
    }
    found.then_some(cxx)
}

/// The man pages' programs under `c/libcpc/illumos-examples/`, built as their pages say for
/// each of `languages` (C modes; and as C++ if `as_cxx`), shared and static; the executables.
fn man_page_builds(
    name: &str,
    languages: &[&str],
    as_cxx: bool,
    libraries: &[&str],
) -> Vec<std::path::PathBuf> {
    let name = format!("illumos-examples/{name}");
    let mut built = Vec::new();
    for linkage in [Linkage::Shared, Linkage::Static] {
        for language in languages {
            let options: Vec<&str> = language.split(' ').collect();
            built.push(c_clients::build_man_page_program(&name, linkage, &options, "", libraries));
        }
        if let Some(cxx) = cxx().filter(|_| as_cxx) {
            built.push(c_clients::build_man_page_program(
                &name,
                linkage,
                &["-std=c++11"],
                &cxx,
                libraries,
            ));
        }
    }
    built
}

const STRICT_C: [&str; 3] = ["-std=c89 -pedantic", "-std=c99 -pedantic", "-std=c11 -pedantic"];
const GNU_C: [&str; 3] = ["-std=gnu89", "-std=gnu99", "-std=gnu11"];

#[test]
fn the_headers_give_what_illumos_headers_give_in_c89_c99_c11_and_cxx() {
    // Strict ISO modes: every declaration and constant, no warning.
    for linkage in [Linkage::Shared, Linkage::Static] {
        for language in ["-std=c89", "-std=c99", "-std=c11"] {
            let options = [language, "-pedantic", "-Werror=implicit-function-declaration"];
            let exe = build_with("cpc_header", linkage, &options, "");
            let (out, _) = run_exe(&exe, &format!("cpc_header ({language})"), "sim", &[]);
            assert_eq!(out, "header ok\n");
        }
    }
    // What comes with <libcpc.h> alone (strerror, strdupa, F_SETFL, ucontext_t, …).
    // (strdupa is glibc's only with _GNU_SOURCE; illumos's <string.h> has it by default.)
    for language in GNU_C {
        let options = [language, "-D_GNU_SOURCE", "-Werror=implicit-function-declaration"];
        let exe = build_with("cpc_header_gnu", Linkage::Shared, &options, "");
        run_exe(&exe, &format!("cpc_header_gnu ({language})"), "sim", &[]);
    }
    if let Some(cxx) = cxx() {
        let exe = build_with("cpc_header_gnu", Linkage::Shared, &["-std=c++11"], &cxx);
        run_exe(&exe, "cpc_header_gnu (C++)", "sim", &[]);
    }
}

#[test]
fn cpc_bind_curlwp_example_1_builds_unchanged_and_takes_its_error_path_for_missing_events() {
    for exe in man_page_builds("cpc_bind_curlwp_ex1", &STRICT_C, true, &[]) {
        // Its default events, UltraSPARC's EC_ref and EC_hit, exist on no host of ours: the
        // documented path, error() with strerror's text (a crash when strerror was implicitly
        // declared and its pointer truncated).
        for host in ["linux", "sim"] {
            let (status, out, err) = run_status(&exe, host, &[], &[]);
            assert_eq!(status, Some(2), "{}: {out}{err}", exe.display());
            assert!(err.contains("could not add first request: Invalid argument\n"), "{err}");
        }
        // Events the host has: 20 iterations of an empty computation.
        for (host, e0, e1) in
            [("linux", "page-faults", "task-clock"), ("sim", "PAPI_tot_ins", "PAPI_br_ins")]
        {
            let env = [("EVENT0", e0), ("EVENT1", e1)];
            let (status, out, err) = run_status(&exe, host, &[], &env);
            assert_eq!(status, Some(0), "{}: {out}{err}", exe.display());
            assert_eq!(out.lines().count(), 20, "{out}");
            assert!(out.starts_with("  1: ") && out.contains("\n 20: "), "{out}");
        }
    }
}

#[test]
fn cpc_bind_curlwp_example_2_gets_overflow_signals_and_restarts_on_the_linux_host() {
    let gnu = GNU_C.map(|language| format!("{language} -D_GNU_SOURCE"));
    let gnu: Vec<&str> = gnu.iter().map(String::as_str).collect();
    // C only: its handler converts `void *` implicitly, which C++ refuses.
    for exe in man_page_builds("cpc_bind_curlwp_ex2", &gnu, false, &[]) {
        // 4 000 page faults counted from UINT64_MAX - 999: an overflow every 1 000.
        let (status, out, err) = run_status(&exe, "linux", &[], &[("EVENT", "page-faults")]);
        // Known race of the Linux host's overflow relay (libcpc/src/overflow/linux.rs, issue 25
        // item 6): a signal the watcher queued just before the program's cpc_unbind arrives after
        // it, and the example's handler then fails to sample ("cannot sample: Invalid argument",
        // error()'s status 2). Everything before must still be right.
        let relayed_late = status == Some(2) && err == "cannot sample: Invalid argument\n";
        if relayed_late {
            eprintln!("{}: a signal arrived after cpc_unbind (the relay's race)", exe.display());
            assert!(out.starts_with("lwp1 - si_addr 0x"), "{out}");
            continue;
        }
        assert_eq!(status, Some(0), "{}: {out}{err}", exe.display());
        let signals: i32 = out
            .lines()
            .find_map(|l| l.strip_prefix("signals "))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no signals line: {out}"));
        assert!(signals >= 1, "{out}");
        assert!(out.starts_with("lwp1 - si_addr 0x"), "{out}");
        // An event the host lacks: the documented error path.
        let (status, _, err) = run_status(&exe, "linux", &[], &[("EVENT", "EC_ref")]);
        assert_eq!(status, Some(2), "{err}");
        assert!(err.contains("cannot add request to set: Invalid argument\n"), "{err}");
    }
}

#[test]
fn cpc_enable_example_1_runs_unchanged_where_nothing_is_bound() {
    let c89 = STRICT_C[0];
    for exe in man_page_builds("cpc_enable_ex1", &STRICT_C, true, &[]) {
        for host in ["linux", "sim"] {
            let (status, out, err) = run_status(&exe, host, &[], &[]);
            // main falls off its end: 0 from C99 on, whatever in C89 — but never a crash.
            assert!(status.is_some(), "{}: killed\n{out}{err}", exe.display());
            if !exe.to_string_lossy().contains(&c89.replace([' ', '-', '='], "")) {
                assert_eq!(status, Some(0), "{}: {out}{err}", exe.display());
            }
        }
    }
}

#[test]
fn libpctx_links_as_lpctx_and_lcpc_lpctx_with_its_own_prototypes_and_dlsym() {
    for libraries in [&["pctx"][..], &["cpc", "pctx"]] {
        for exe in man_page_builds("pctx_link", &["-std=c99 -D_GNU_SOURCE"], true, libraries) {
            // dlopen finds libpctx.so through LD_LIBRARY_PATH (run_status sets it).
            let (status, out, err) = run_status(&exe, "sim", &["/usr/sim/bin/hot-cold"], &[]);
            assert_eq!(status, Some(0), "{}: {out}{err}", exe.display());
            assert_eq!(out, "init_lwp 1\nunknown event reported\ndlsym ok\nlink ok\n");
        }
    }
}

#[test]
fn pctx_create_executes_its_filename_with_argv_as_given() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let exe = c_clients::build(Library::Cpc, "pctx_create", linkage);
        let me = exe.to_str().expect("a UTF-8 path");
        // The child is this program, told its name is "renamed-child": it exits 7.
        let (out, _) = run_exe(&exe, "pctx_create run", "linux", &["run", me]);
        assert_eq!(out, "status 7\n");
        // On the simulator the file names the program (argv[0] is any name).
        let (out, _) = run_exe(&exe, "pctx_create run", "sim", &["run", "/usr/sim/bin/hot-cold"]);
        assert_eq!(out, "status 0\n");
    }
}

#[test]
fn pctx_create_and_pctx_capture_report_failures_through_the_error_function_or_stderr() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("no-such-program");
    let missing = missing.to_str().expect("a UTF-8 path");
    for linkage in [Linkage::Shared, Linkage::Static] {
        let exe = c_clients::build(Library::Cpc, "pctx_create", linkage);
        let (out, err) = run_exe(&exe, "pctx_create fail", "linux", &["fail", missing]);
        assert_eq!(
            out,
            format!(
                "errfn create: cannot find program '{missing}'\n\
                 errfn capture: pid 2000000000 doesn't exist\n"
            )
        );
        assert_eq!(
            err,
            format!(
                "libpctx: pctx_create: cannot find program '{missing}'\n\
                 libpctx: pctx_capture: pid 2000000000 doesn't exist\n"
            )
        );
    }
}

#[test]
fn user_and_system_modes_select_what_software_events_count_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_rings", linkage, "linux", &[]);
        assert!(out.ends_with("rings ok\n"), "{out}");
    }
}
