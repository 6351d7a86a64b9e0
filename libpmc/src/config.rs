//! libpmc's settings for this process: which host serves it, the simulated machine, how the
//! Linux host walks user stacks, and the CPU the event catalog answers for.
//!
//! Library code reads them here, never from the environment. The edges of a program read the
//! environment: the tools' `main` and the C ABI's entry points call [`Config::from_env`] and
//! [`install`] (or [`install_once`]) the result; a Rust program may build a [`Config`] itself,
//! or leave the defaults (the automatic host, the default simulated machine, DWARF unwinding,
//! the host's own CPU).
//!
//! Each setting is kept as the text it was given and read where it is used, so a value that is
//! not valid fails the operation that needs it with an error naming the variable, as it does when
//! it comes from the environment (an unknown `PMC_HOST` fails the first call that needs the
//! host; a `PMC_SIM_MODEL` that names no model fails the making of the simulated machine).

use std::ffi::OsString;
use std::sync::{OnceLock, PoisonError, RwLock};

/// The variable naming the host: `freebsd`, `linux` or `sim` (see [`crate::host`]).
pub const PMC_HOST_VAR: &str = "PMC_HOST";
/// The variable naming how the Linux host walks user stacks: `dwarf` or `fp`.
pub const PMC_CALL_GRAPH_VAR: &str = "PMC_CALL_GRAPH";
/// The variable that makes the catalog answer for another CPU (FreeBSD's `pmc_cpuid` format).
pub const PMC_CPUID_VAR: &str = "PMC_CPUID";
/// The variable giving the simulated machine's number of CPUs.
pub const PMC_SIM_CPUS_VAR: &str = "PMC_SIM_CPUS";
/// The variable naming the simulated machine's CPU model.
pub const PMC_SIM_MODEL_VAR: &str = "PMC_SIM_MODEL";
/// The variable giving the simulated machine's scheduling seed.
pub const PMC_SIM_SEED_VAR: &str = "PMC_SIM_SEED";

/// The simulated machine's settings (see `pmc::host::sim`); `None` or empty: the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimConfig {
    /// `PMC_SIM_CPUS`: CPUs of the machine, 1 to 64 (default 2).
    pub cpus: Option<String>,
    /// `PMC_SIM_MODEL`: the CPU model's name (default `skylake`).
    pub model: Option<String>,
    /// `PMC_SIM_SEED`: the scheduler's seed (default 1).
    pub seed: Option<String>,
}

/// libpmc's settings; `None` (or empty text) leaves a setting at its default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// `PMC_HOST`: the host's name; unset: FreeBSD's module if present, else Linux.
    pub host: Option<String>,
    /// `PMC_CALL_GRAPH`: `dwarf` (the default) or `fp`; `pmc::host::set_call_graph` overrides it.
    pub call_graph: Option<String>,
    /// `PMC_CPUID`: the CPU the catalog answers for, as FreeBSD's `pmc_cpuid` names it; unset:
    /// the host's. Kept as given: text that is not UTF-8 is an error where it is used.
    pub cpuid: Option<OsString>,
    /// The simulated machine.
    pub sim: SimConfig,
}

impl Config {
    /// The settings the environment gives (the variables above). Only a program's edges call
    /// this: the tools' `main` and the C ABI's entry points.
    pub fn from_env() -> Config {
        let text = |name: &str| std::env::var(name).ok();
        Config {
            host: text(PMC_HOST_VAR),
            call_graph: text(PMC_CALL_GRAPH_VAR),
            cpuid: std::env::var_os(PMC_CPUID_VAR),
            sim: SimConfig {
                cpus: text(PMC_SIM_CPUS_VAR),
                model: text(PMC_SIM_MODEL_VAR),
                seed: text(PMC_SIM_SEED_VAR),
            },
        }
    }
}

/// This process's settings, once installed.
static INSTALLED: OnceLock<RwLock<Config>> = OnceLock::new();

/// Makes `config` this process's settings from now on. The host is chosen once, at its first
/// use: a `host` installed after that changes nothing (see `pmc::host::select`).
pub fn install(config: Config) {
    let mut made = Some(config);
    let slot = INSTALLED.get_or_init(|| RwLock::new(made.take().unwrap_or_default()));
    if let Some(config) = made {
        *slot.write().unwrap_or_else(PoisonError::into_inner) = config;
    }
}

/// Installs the settings `make` gives unless some are installed already (a program that
/// installed its own keeps them): what the C ABI's entry points do with [`Config::from_env`].
pub fn install_once(make: impl FnOnce() -> Config) {
    INSTALLED.get_or_init(|| RwLock::new(make()));
}

/// Runs `f` with this process's settings (the defaults if none were installed).
pub(crate) fn with<R>(f: impl FnOnce(&Config) -> R) -> R {
    match INSTALLED.get() {
        Some(slot) => f(&slot.read().unwrap_or_else(PoisonError::into_inner)),
        None => f(&Config::default()),
    }
}

/// A copy of this process's settings.
pub fn current() -> Config {
    with(Config::clone)
}
