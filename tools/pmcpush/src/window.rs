//! One window of profile: the input of the pusher.
//!
//! A window is what pmcstat produced for a stretch of time (10 s by default): a pprof profile,
//! already symbolised on the host with its mappings and build IDs kept, and the facts a backend
//! needs beside it (when, which event, which process and host).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One window of profile, ready to be pushed.
///
/// The profile bytes are shared (`Arc`): a window pushed to several backends, kept in the
/// queue and written to the spool is never copied.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// A serialised pprof `Profile` message, gzipped or not (pmcstat writes it gzipped).
    pub profile: Arc<[u8]>,
    /// When, what and where.
    pub meta: WindowMeta,
}

impl Window {
    /// A window of `profile` (pprof bytes) described by `meta`.
    pub fn new(profile: impl Into<Arc<[u8]>>, meta: WindowMeta) -> Self {
        Window { profile: profile.into(), meta }
    }

    /// The bytes this window holds, which is what the queue and the spool count against their
    /// bounds.
    pub fn size_bytes(&self) -> usize {
        self.profile.len() + self.meta.size_bytes()
    }
}

/// What a backend needs to know of a window beside its samples.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowMeta {
    /// When the window began.
    pub start: SystemTime,
    /// When the window ended (after `start`).
    pub end: SystemTime,
    /// The sampled event as pmcstat names it (`instructions`, `cpu-clock`, …).
    pub event: String,
    /// The type and unit of the samples' values as the backend should show them
    /// (`samples`/`count`, `cpu`/`nanoseconds`).
    pub sample_type: SampleType,
    /// Events between two samples, when the event had a fixed sampling period.
    pub period: Option<u64>,
    /// Who was profiled: OpenTelemetry resource attributes (`service.name`, `host.name`, …).
    pub resource: Resource,
    /// Extra labels that name the series (`env=prod`); Pyroscope and Parca put them in the
    /// series name, OTLP as profile attributes.
    pub labels: Vec<(String, String)>,
}

impl WindowMeta {
    /// A window of `event` from `start` to `end`, of samples counted as `samples`/`count`,
    /// for the service `service_name`.
    pub fn new(start: SystemTime, end: SystemTime, event: &str, service_name: &str) -> Self {
        WindowMeta {
            start,
            end,
            event: event.to_owned(),
            sample_type: SampleType::new("samples", "count"),
            period: None,
            resource: Resource::new(service_name),
            labels: Vec::new(),
        }
    }

    /// `start` in nanoseconds since the Unix epoch (0 for a time before it).
    pub fn start_unix_nanos(&self) -> u64 {
        unix_nanos(self.start)
    }

    /// `end` in nanoseconds since the Unix epoch (0 for a time before it).
    pub fn end_unix_nanos(&self) -> u64 {
        unix_nanos(self.end)
    }

    /// How long the window lasted (zero when `end` is not after `start`).
    pub fn duration(&self) -> Duration {
        self.end.duration_since(self.start).unwrap_or_default()
    }

    fn size_bytes(&self) -> usize {
        let labels: usize = self.labels.iter().map(|(k, v)| k.len() + v.len()).sum();
        std::mem::size_of::<Self>()
            + self.event.len()
            + self.sample_type.kind.len()
            + self.sample_type.unit.len()
            + labels
            + self.resource.size_bytes()
    }
}

/// Nanoseconds since the Unix epoch, saturating at 0 before it and at `u64::MAX` after 2554.
pub(crate) fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The type and unit of sample values (pprof's and OTLP's `ValueType`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleType {
    /// What is counted: `samples`, `cpu`, `instructions`.
    pub kind: String,
    /// Its unit: `count`, `nanoseconds`.
    pub unit: String,
}

impl SampleType {
    /// `kind`/`unit`.
    pub fn new(kind: &str, unit: &str) -> Self {
        SampleType { kind: kind.to_owned(), unit: unit.to_owned() }
    }
}

/// The value of a resource attribute.
#[derive(Clone, Debug, PartialEq)]
pub enum AttributeValue {
    /// A string (`host.name`).
    String(String),
    /// An integer (`process.pid`).
    Int(i64),
}

impl From<&str> for AttributeValue {
    fn from(s: &str) -> Self {
        AttributeValue::String(s.to_owned())
    }
}

impl From<String> for AttributeValue {
    fn from(s: String) -> Self {
        AttributeValue::String(s)
    }
}

impl From<i64> for AttributeValue {
    fn from(n: i64) -> Self {
        AttributeValue::Int(n)
    }
}

impl std::fmt::Display for AttributeValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttributeValue::String(s) => f.write_str(s),
            AttributeValue::Int(n) => write!(f, "{n}"),
        }
    }
}

/// OpenTelemetry resource attributes: who was profiled, on which host.
///
/// Keys follow OpenTelemetry's semantic conventions (`service.name`, `host.name`, `host.id`,
/// `process.pid`, `process.executable.name`, `thread.id`, `thread.name`, `container.id`);
/// [`Resource::detect`](crate::resource) fills the host's and a process's.
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    attributes: Vec<(String, AttributeValue)>,
}

/// The attribute key that names the service.
pub const SERVICE_NAME: &str = "service.name";

impl Resource {
    /// A resource with only `service.name`.
    pub fn new(service_name: &str) -> Self {
        Resource { attributes: vec![(SERVICE_NAME.to_owned(), service_name.into())] }
    }

    /// Sets `key` to `value`, replacing an earlier value of `key` (keys are unique).
    pub fn set(&mut self, key: &str, value: impl Into<AttributeValue>) -> &mut Self {
        let value = value.into();
        match self.attributes.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = value,
            None => self.attributes.push((key.to_owned(), value)),
        }
        self
    }

    /// `self` with `key` set to `value`.
    #[must_use]
    pub fn with(mut self, key: &str, value: impl Into<AttributeValue>) -> Self {
        self.set(key, value);
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&AttributeValue> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `service.name` (empty when it was removed by hand, which [`Resource::new`] never does).
    pub fn service_name(&self) -> String {
        self.get(SERVICE_NAME).map(ToString::to_string).unwrap_or_default()
    }

    /// The attributes in the order they were first set.
    pub fn attributes(&self) -> &[(String, AttributeValue)] {
        &self.attributes
    }

    fn size_bytes(&self) -> usize {
        self.attributes
            .iter()
            .map(|(k, v)| {
                k.len()
                    + match v {
                        AttributeValue::String(s) => s.len(),
                        AttributeValue::Int(_) => 8,
                    }
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_keeps_one_value_per_key() {
        let r = Resource::new("db").with("process.pid", 7).with("process.pid", 8);
        assert_eq!(r.get("process.pid"), Some(&AttributeValue::Int(8)));
        assert_eq!(r.attributes().len(), 2);
        assert_eq!(r.service_name(), "db");
    }

    #[test]
    fn window_times_are_unix_nanoseconds() {
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let meta = WindowMeta::new(start, start + Duration::from_secs(10), "cycles", "svc");
        assert_eq!(meta.start_unix_nanos(), 1_700_000_000_000_000_000);
        assert_eq!(meta.duration(), Duration::from_secs(10));
    }
}
