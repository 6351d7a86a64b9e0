//! One [`Pusher`] per `--push` backend, started from the options, fed the same windows, and
//! their status lines.

use std::time::Duration;

use pmcpush::{Pusher, PusherConfig, Status, Window};

use super::options::PushOptions;
use crate::failure::{Failure, io_failure, tell};

/// The pushers of a run, in `--push` order.
pub struct Pushers {
    pushers: Vec<(String, Pusher)>,
}

impl Pushers {
    /// Starts one pusher per target. A CA file that cannot be read or a backend whose client
    /// cannot be set up is a failure before anything is sampled or read.
    pub fn start(o: &PushOptions) -> Result<Pushers, Failure> {
        let ca = match &o.ca {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                io_failure(&format!("--push-ca: cannot read {}", path.display()), &e)
            })?),
            None => None,
        };
        let mut pushers = Vec::new();
        for target in &o.targets {
            let name = format!("{}={}", target.backend, target.url);
            let mut config = PusherConfig::new(target.clone());
            config.connection.headers = o.headers.clone();
            config.connection.tls.ca_pem = ca.clone();
            if let Some(attempts) = o.attempts {
                config.backoff.max_attempts = attempts;
            }
            let pusher = Pusher::start(config).map_err(|e| Failure {
                message: format!("--push {name}: {e}"),
                status: crate::failure::EX_UNAVAILABLE,
            })?;
            pushers.push((name, pusher));
        }
        Ok(Pushers { pushers })
    }

    /// Offers `window` to every pusher (never waits on the network).
    pub fn offer(&self, window: &Window) {
        for (_, pusher) in &self.pushers {
            pusher.offer(window.clone());
        }
    }

    /// Waits, at most `timeout` for each, until every window offered has landed.
    pub fn flush(&self, timeout: Duration) {
        for (_, pusher) in &self.pushers {
            pusher.flush(timeout);
        }
    }

    /// Says on standard error what each pusher did so far.
    pub fn tell_status(&self) {
        for (name, pusher) in &self.pushers {
            tell(format_args!("push {name}: {}", pusher.status()));
        }
    }

    /// Sends what is queued within `deadline` (per pusher), stops the pushers and says what
    /// each did. Returns whether every window offered was sent.
    pub fn shutdown(self, deadline: Duration) -> bool {
        let mut all_sent = true;
        for (name, pusher) in self.pushers {
            let status = pusher.shutdown(deadline);
            tell(format_args!("push {name}: {status}"));
            all_sent &= everything_sent(&status);
        }
        all_sent
    }
}

/// Whether every window offered was sent (none dropped, none still waiting).
fn everything_sent(status: &Status) -> bool {
    status.windows_sent == status.windows_offered
        && status.dropped.total() == 0
        && status.queued == 0
        && status.in_spool == 0
}
