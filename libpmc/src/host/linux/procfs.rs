//! What `/proc` says about processes and perf's permissions, for the Linux host's kernel and
//! its perf counters.

use hwpmc::Pid;

/// `kernel.perf_event_paranoid`, as text for messages.
pub(crate) fn paranoid_setting() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Why perf refuses `what` to this process, in words.
pub(crate) fn not_allowed(what: &str) -> String {
    format!(
        "perf does not allow {what} (kernel.perf_event_paranoid is {}; measuring other users' \
         processes or whole CPUs needs root or CAP_PERFMON)",
        paranoid_setting()
    )
}

/// The numeric entries of directory `dir` (`/proc`'s processes, a task directory's threads),
/// in order.
pub(crate) fn numbered_entries(dir: &str) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut ids: Vec<Pid> =
        entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    ids.sort_unstable();
    ids
}

/// The state letter of process `pid` (`R`, `S`, `Z`, …), if it exists.
pub(crate) fn process_state_letter(pid: Pid) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the state follows the last ')' (comm may contain parentheses).
    stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Whether process `pid` exists and has not ended (a zombie has: it only waits to be reaped).
pub(crate) fn process_running(pid: Pid) -> bool {
    !matches!(process_state_letter(pid), Some('Z' | 'X') | None)
}
