//! Pyroscope's ingest API: `POST /ingest?name=APP{LABELS}&from=&until=&format=pprof&…` with the
//! pprof profile as the body (Pyroscope reads the sample types and period from it).

use super::{Connection, Delivered, SendError, SinkError, http, series_labels};
use crate::target::Target;
use crate::window::{Window, WindowMeta};

/// What Pyroscope shows as the profiler that sent the data.
pub const SPY_NAME: &str = "pmcstat";

/// The sample rate Pyroscope assumes when none is known (its own default).
const DEFAULT_SAMPLE_RATE: u64 = 100;

/// A client of a Pyroscope server.
#[derive(Debug)]
pub struct PyroscopeSink {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: Vec<(String, String)>,
}

impl PyroscopeSink {
    /// A client of `target` (`http://host:4040`, or a path prefix under which `/ingest` is).
    pub fn new(target: &Target, connection: &Connection) -> Result<Self, SinkError> {
        let url = reqwest::Url::parse(&format!("{}/ingest", target.url))
            .map_err(|e| SinkError::Url { url: target.url.clone(), reason: e.to_string() })?;
        Ok(PyroscopeSink {
            client: connection
                .tls
                .http_client(connection.request_timeout, connection.connect_timeout)?,
            url,
            headers: connection.request_headers(),
        })
    }

    /// Ingests one window; the body's size in bytes.
    pub async fn send(&self, window: &Window) -> Result<Delivered, SendError> {
        let meta = &window.meta;
        let mut url = self.url.clone();
        url.query_pairs_mut()
            .append_pair("name", &series_name(meta))
            .append_pair("from", &(meta.start_unix_nanos() / 1_000_000_000).to_string())
            .append_pair("until", &meta.end_unix_nanos().div_ceil(1_000_000_000).to_string())
            .append_pair("format", "pprof")
            .append_pair("sampleRate", &sample_rate(meta).to_string())
            .append_pair("spyName", SPY_NAME);
        let (len, _) = http::post(
            &self.client,
            url,
            &self.headers,
            "application/octet-stream",
            window.profile.to_vec(),
        )
        .await?;
        Ok(Delivered::whole(len))
    }
}

/// `SERVICE{key=value,…}`: Pyroscope's series name, the application name followed by the
/// labels. Characters that would end a key or value early (`{`, `}`, `,`, `=`) become `_`.
pub fn series_name(meta: &WindowMeta) -> String {
    let clean = |s: &str| s.replace(['{', '}', ',', '='], "_");
    let labels: Vec<String> =
        series_labels(meta).iter().map(|(k, v)| format!("{}={}", clean(k), clean(v))).collect();
    format!("{}{{{}}}", clean(&meta.resource.service_name()), labels.join(","))
}

/// Samples per second, for a clock event (a period in nanoseconds); Pyroscope's default
/// otherwise, as the pprof body carries the real period.
fn sample_rate(meta: &WindowMeta) -> u64 {
    match meta.period {
        Some(period) if period > 0 && meta.sample_type.unit == "nanoseconds" => {
            (1_000_000_000 / period).max(1)
        }
        _ => DEFAULT_SAMPLE_RATE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn the_name_carries_the_labels() {
        let mut meta = WindowMeta::new(UNIX_EPOCH, UNIX_EPOCH, "cycles", "db{1}");
        meta.resource.set("host.name", "h1");
        meta.labels.push(("env".into(), "prod,eu".into()));
        assert_eq!(series_name(&meta), "db_1_{host_name=h1,pmc_event=cycles,env=prod_eu}");
    }

    #[test]
    fn a_clock_event_gives_its_sample_rate_others_pyroscopes_default() {
        let mut meta = WindowMeta::new(UNIX_EPOCH, UNIX_EPOCH, "cpu-clock", "svc");
        meta.sample_type = crate::SampleType::new("cpu", "nanoseconds");
        meta.period = Some(1_000_000);
        assert_eq!(sample_rate(&meta), 1000);
        meta.sample_type = crate::SampleType::new("samples", "count");
        meta.period = Some(65536);
        assert_eq!(sample_rate(&meta), DEFAULT_SAMPLE_RATE);
    }
}
