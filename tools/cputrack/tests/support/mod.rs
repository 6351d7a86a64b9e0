//! What the end-to-end tests of cputrack and cpustat share (cpustat's include this file):
//! running a tool on a host, and reading its output.
#![allow(dead_code, unreachable_pub)]

use std::process::{Command, Output};

/// Runs the tool at `exe` with `args` on `host`, with the simulator's defaults.
pub fn run_tool(exe: &str, host: &str, args: &[&str]) -> Output {
    run_tool_on_model(exe, host, None, args)
}

/// [`run_tool`] on the simulated CPU `model` (`PMC_SIM_MODEL`), if given.
pub fn run_tool_on_model(exe: &str, host: &str, model: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(exe);
    command.args(args).env("PMC_HOST", host);
    for var in ["PMC_SIM_CPUS", "PMC_SIM_MODEL", "PMC_SIM_SEED"] {
        command.env_remove(var);
    }
    if let Some(model) = model {
        command.env("PMC_SIM_MODEL", model);
    }
    command.output().unwrap_or_else(|e| panic!("run {exe}: {e}"))
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lines of `out` whose label column (the third) is `label`, as their fields.
pub fn lines_labelled<'a>(out: &'a str, label: &str) -> Vec<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.get(2) == Some(&label))
        .collect()
}
