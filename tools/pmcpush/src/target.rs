//! Where windows go: a backend kind and its URL, as a command line names them
//! (`--push pyroscope=https://pyroscope.example:4040`).

use std::str::FromStr;

/// The kinds of backend the pusher speaks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// OTLP profiles over gRPC (`ProfilesService/Export`), usually port 4317.
    OtlpGrpc,
    /// OTLP profiles over HTTP/protobuf (`POST /v1development/profiles`), usually port 4318.
    OtlpHttp,
    /// Pyroscope's ingest API (`POST /ingest`), usually port 4040.
    Pyroscope,
    /// Parca's `ProfileStoreService/WriteRaw` over gRPC, usually port 7070.
    Parca,
}

impl Backend {
    /// The name a command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Backend::OtlpGrpc => "otlp-grpc",
            Backend::OtlpHttp => "otlp-http",
            Backend::Pyroscope => "pyroscope",
            Backend::Parca => "parca",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend and its base URL (`http://` or `https://`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The kind of backend.
    pub backend: Backend,
    /// Its base URL: scheme, host, port, and for HTTP backends an optional path prefix.
    pub url: String,
}

/// Why a target could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetError {
    /// The text is not `KIND=URL`.
    #[error("expected KIND=URL (KIND: otlp-grpc, otlp-http, pyroscope, parca): {0:?}")]
    Syntax(String),
    /// The kind is none of the known ones.
    #[error("unknown backend {0:?} (otlp-grpc, otlp-http, pyroscope, parca)")]
    UnknownBackend(String),
    /// The URL is neither `http://` nor `https://`.
    #[error("the URL must start with http:// or https://: {0:?}")]
    Scheme(String),
}

impl Target {
    /// A target of `backend` at `url`.
    pub fn new(backend: Backend, url: &str) -> Self {
        Target { backend, url: url.trim_end_matches('/').to_owned() }
    }

    /// Whether the URL asks for TLS.
    pub fn is_https(&self) -> bool {
        self.url.starts_with("https://")
    }
}

impl FromStr for Backend {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, TargetError> {
        [Backend::OtlpGrpc, Backend::OtlpHttp, Backend::Pyroscope, Backend::Parca]
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| TargetError::UnknownBackend(s.to_owned()))
    }
}

impl FromStr for Target {
    type Err = TargetError;

    /// `KIND=URL`, for instance `otlp-grpc=http://127.0.0.1:4317`.
    fn from_str(s: &str) -> Result<Self, TargetError> {
        let (kind, url) = s.split_once('=').ok_or_else(|| TargetError::Syntax(s.to_owned()))?;
        let backend: Backend = kind.parse()?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(TargetError::Scheme(url.to_owned()));
        }
        Ok(Target::new(backend, url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kind_equals_url() {
        let t: Target = "pyroscope=https://p.example:4040/".parse().unwrap();
        assert_eq!(t, Target::new(Backend::Pyroscope, "https://p.example:4040"));
        assert!(t.is_https());
        assert_eq!(
            "zipkin=http://x".parse::<Target>(),
            Err(TargetError::UnknownBackend("zipkin".into()))
        );
        assert!(matches!("parca=grpc://x".parse::<Target>(), Err(TargetError::Scheme(_))));
        assert!(matches!("parca".parse::<Target>(), Err(TargetError::Syntax(_))));
    }
}
