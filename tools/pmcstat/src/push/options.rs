//! The `--push` options: which backends, how long a window is, and what the requests carry.
//! A leaf of the command line ([`crate::cli`] adds [`args`] and calls [`parse`]), so that the
//! push stages can read them without the rest of the command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches};
use pmcpush::Target;

/// The default window: long enough for a few hundred samples at a fleet's 19–99 Hz, short
/// enough that a backend's view is at most this far behind.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

/// The longest window (a day): beyond it a backend's time axis would say little.
const MAX_WINDOW_SECS: f64 = 86_400.0;

/// What `--push` and its companions say. `targets` empty: nothing is pushed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOptions {
    /// `--push KIND=URL`, one pusher each.
    pub targets: Vec<Target>,
    /// `--push-window SECS`.
    pub window: Option<Duration>,
    /// `--push-service NAME`: the `service.name` of every window.
    pub service: Option<String>,
    /// `--push-header K=V`: extra headers (gRPC metadata), e.g. a tenant.
    pub headers: Vec<(String, String)>,
    /// `--push-ca FILE`: a PEM file of certificates to trust for `https` URLs.
    pub ca: Option<PathBuf>,
    /// `--push-retries N`: attempts per window.
    pub attempts: Option<u32>,
    /// `--push-label K=V`: labels of every window.
    pub labels: Vec<(String, String)>,
}

impl PushOptions {
    /// Whether anything is to be pushed.
    pub fn enabled(&self) -> bool {
        !self.targets.is_empty()
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        self.window.unwrap_or(DEFAULT_WINDOW)
    }

    /// Whether an option other than `--push` was given (which would then be ignored).
    pub fn companions_given(&self) -> bool {
        self.window.is_some()
            || self.service.is_some()
            || !self.headers.is_empty()
            || self.ca.is_some()
            || self.attempts.is_some()
            || !self.labels.is_empty()
    }
}

/// The options, for clap.
pub fn args() -> Vec<Arg> {
    let value = |id: &'static str, name: &'static str, help: &'static str| {
        Arg::new(id).long(id).num_args(1).value_name(name).help(help)
    };
    vec![
        value("push", "KIND=URL", "push the samples as profile windows to a backend: otlp-grpc, otlp-http, pyroscope or parca (repeatable; with -R, a log's samples)")
            .action(ArgAction::Append),
        value("push-window", "SECS", "with --push: the length of a window (default 10)")
            .allow_negative_numbers(true),
        value("push-service", "NAME", "with --push: the service name of the windows (default: the command's name, else pmcstat)"),
        value("push-header", "K=V", "with --push: a header sent with every request, e.g. X-Scope-OrgID=tenant (repeatable)")
            .action(ArgAction::Append),
        value("push-label", "K=V", "with --push: a label of every window (repeatable)")
            .action(ArgAction::Append),
        value("push-ca", "FILE", "with --push: PEM certificates to trust for https URLs"),
        value("push-retries", "N", "with --push: attempts per window before it is dropped (default 6)")
            .allow_negative_numbers(true),
    ]
}

/// Reads the options from `m`; a mistake is a message for a usage error.
pub fn parse(m: &ArgMatches) -> Result<PushOptions, String> {
    let many = |id: &str| -> Vec<&String> {
        m.get_many::<String>(id).map(|v| v.collect()).unwrap_or_default()
    };
    let pairs = |id: &str| -> Result<Vec<(String, String)>, String> {
        many(id)
            .into_iter()
            .map(|text| match text.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
                _ => Err(format!("--{id} {text}: give NAME=VALUE")),
            })
            .collect()
    };
    let targets = many("push")
        .into_iter()
        .map(|text| {
            text.parse::<Target>().map_err(|e| {
                format!("--push {text}: {e} (KIND=URL, KIND one of otlp-grpc, otlp-http, pyroscope, parca)")
            })
        })
        .collect::<Result<_, _>>()?;
    let window = match m.get_one::<String>("push-window") {
        None => None,
        Some(text) => {
            let secs: f64 =
                text.parse().map_err(|_| format!("--push-window {text}: not a number"))?;
            // NaN is in no range.
            if !(0.1..=MAX_WINDOW_SECS).contains(&secs) {
                return Err(format!(
                    "--push-window {text}: a window must be from 0.1 to {MAX_WINDOW_SECS} seconds"
                ));
            }
            Some(Duration::from_secs_f64(secs))
        }
    };
    let attempts = match m.get_one::<String>("push-retries") {
        None => None,
        Some(text) => match text.parse::<u32>() {
            Ok(n @ 1..=100) => Some(n),
            _ => {
                return Err(format!(
                    "--push-retries {text}: give a number of attempts from 1 to 100"
                ));
            }
        },
    };
    Ok(PushOptions {
        targets,
        window,
        service: m.get_one::<String>("push-service").cloned(),
        headers: pairs("push-header")?,
        ca: m.get_one::<String>("push-ca").map(PathBuf::from),
        attempts,
        labels: pairs("push-label")?,
    })
}
