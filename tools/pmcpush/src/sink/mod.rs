//! The backends' wire protocols: each sink turns one window into one request and says whether
//! a failure is worth retrying.

pub mod otlp_grpc;
pub mod otlp_http;
pub mod parca;
pub mod pyroscope;

mod grpc;
mod http;

use std::time::Duration;

use crate::auth::{self, Auth};
use crate::otlp::ConvertOptions;
use crate::pprof::DecodeError;
use crate::target::{Backend, Target};
use crate::tls::{TlsConfig, TlsError};
use crate::window::Window;

/// How a sink connects: credentials, headers, TLS and time limits.
#[derive(Clone, Debug)]
pub struct Connection {
    /// Credentials sent with every request.
    pub auth: Auth,
    /// Extra headers (or gRPC metadata) sent with every request, such as Pyroscope's
    /// `X-Scope-OrgID`.
    pub headers: Vec<(String, String)>,
    /// Certificates to trust for `https` URLs.
    pub tls: TlsConfig,
    /// The longest one request may take, connection included; a slow backend costs at most
    /// this per attempt.
    pub request_timeout: Duration,
    /// The longest connecting may take.
    pub connect_timeout: Duration,
}

impl Default for Connection {
    fn default() -> Self {
        Connection {
            auth: Auth::None,
            headers: Vec::new(),
            tls: TlsConfig::default(),
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl Connection {
    fn request_headers(&self) -> Vec<(String, String)> {
        auth::request_headers(&self.auth, &self.headers)
    }
}

/// What a backend said of a window it took.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    /// The request's size in bytes (see [`Status::bytes_sent`](crate::Status::bytes_sent)).
    pub bytes: u64,
    /// The backend kept the window but refused part of it (OTLP's partial success), and said
    /// this. Sending it again would duplicate what it kept, so it is not retried; it is
    /// counted and reported.
    pub partial_rejection: Option<String>,
}

impl Delivered {
    /// `bytes` taken whole.
    pub fn whole(bytes: u64) -> Self {
        Delivered { bytes, partial_rejection: None }
    }
}

/// Why a window was not delivered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The network failed or the backend is down, slow or overloaded (a timeout, HTTP 408,
    /// 429 or 5xx, gRPC `UNAVAILABLE`, …): another attempt may succeed.
    #[error("{0}")]
    Retryable(String),
    /// The backend refused the window for good (another 4xx, gRPC `INVALID_ARGUMENT`,
    /// `UNAUTHENTICATED`, …): sending it again would be refused again.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The window's bytes are not a pprof profile.
    #[error(transparent)]
    Unreadable(#[from] DecodeError),
}

/// Why a sink could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// TLS or the HTTP client.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The URL is not one a gRPC channel takes.
    #[error("bad URL {url:?}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value is not valid in HTTP or gRPC metadata.
    #[error("bad header {0:?}")]
    Header(String),
}

/// One backend's client.
#[derive(Debug)]
pub enum Sink {
    /// OTLP profiles over gRPC.
    OtlpGrpc(otlp_grpc::OtlpGrpcSink),
    /// OTLP profiles over HTTP/protobuf.
    OtlpHttp(otlp_http::OtlpHttpSink),
    /// Pyroscope ingest.
    Pyroscope(pyroscope::PyroscopeSink),
    /// Parca `WriteRaw`.
    Parca(parca::ParcaSink),
}

impl Sink {
    /// A client of `target`. gRPC sinks connect lazily (and again after the backend
    /// restarts), so this succeeds while the backend is down; it must run inside a tokio
    /// runtime, as the gRPC channel's background task needs one.
    pub fn new(
        target: &Target,
        connection: &Connection,
        options: ConvertOptions,
    ) -> Result<Sink, SinkError> {
        Ok(match target.backend {
            Backend::OtlpGrpc => {
                Sink::OtlpGrpc(otlp_grpc::OtlpGrpcSink::new(target, connection, options)?)
            }
            Backend::OtlpHttp => {
                Sink::OtlpHttp(otlp_http::OtlpHttpSink::new(target, connection, options)?)
            }
            Backend::Pyroscope => {
                Sink::Pyroscope(pyroscope::PyroscopeSink::new(target, connection)?)
            }
            Backend::Parca => Sink::Parca(parca::ParcaSink::new(target, connection)?),
        })
    }

    /// The kind of backend this sink speaks to.
    pub fn backend(&self) -> Backend {
        match self {
            Sink::OtlpGrpc(_) => Backend::OtlpGrpc,
            Sink::OtlpHttp(_) => Backend::OtlpHttp,
            Sink::Pyroscope(_) => Backend::Pyroscope,
            Sink::Parca(_) => Backend::Parca,
        }
    }

    /// Sends one window; on success, the request body's size in bytes.
    pub async fn send(&self, window: &Window) -> Result<Delivered, SendError> {
        match self {
            Sink::OtlpGrpc(sink) => sink.send(window).await,
            Sink::OtlpHttp(sink) => sink.send(window).await,
            Sink::Pyroscope(sink) => sink.send(window).await,
            Sink::Parca(sink) => sink.send(window).await,
        }
    }
}

/// The labels that name a window's series at Pyroscope and Parca: its resource attributes but
/// `service.name` (which names the application), with keys as label names (`host.name` →
/// `host_name`), then `pmc_event`, then the window's own labels.
pub fn series_labels(meta: &crate::window::WindowMeta) -> Vec<(String, String)> {
    meta.resource
        .attributes()
        .iter()
        .filter(|(k, _)| k != crate::window::SERVICE_NAME)
        .map(|(k, v)| (label_name(k), v.to_string()))
        .chain(std::iter::once(("pmc_event".to_owned(), meta.event.clone())))
        .chain(meta.labels.iter().map(|(k, v)| (label_name(k), v.clone())))
        .collect()
}

/// `name` as a Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`, other characters as `_`.
fn label_name(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}
