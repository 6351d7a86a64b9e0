//! One window's profile made a [`Window`] to push: the pprof bytes of pmcprof's `write_pprof`
//! (functions, lines, mappings with build IDs, so that a backend can symbolise again) and what
//! the backends label it with.

use std::time::SystemTime;

use pmcprof::Profile;
use pmcpush::{Resource, Window, WindowMeta};

/// What every window of a run says besides its profile and times.
#[derive(Debug, Clone)]
pub struct Labels {
    /// `service.name` (Pyroscope's application name).
    pub service: String,
    /// The resource's attributes (host, process) beyond the service name.
    pub resource: Resource,
    /// `--push-label` pairs.
    pub labels: Vec<(String, String)>,
}

/// The window of `profile`'s samples from `start` to `end`; `None` when it has no sample
/// (nothing to say to a backend).
pub fn window(
    profile: &Profile,
    start: SystemTime,
    end: SystemTime,
    labels: &Labels,
) -> std::io::Result<Option<Window>> {
    let Some(pmc) = profile.pmcs().iter().find(|p| p.samples() > 0) else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    pmcprof::write_pprof(profile, &mut bytes)?;
    // The event of the first PMC with samples names the window; pprof keeps every event as a
    // value column of its own.
    let mut meta = WindowMeta::new(start, end, pmc.name(), &labels.service);
    meta.period = Some(pmc.clock_period_ns().unwrap_or(pmc.rate())).filter(|&p| p > 0);
    meta.resource = labels.resource.clone();
    meta.labels = labels.labels.clone();
    Ok(Some(Window::new(bytes, meta)))
}
