//! OTLP profiles over HTTP/protobuf: `POST /v1development/profiles` with an
//! `ExportProfilesServiceRequest` body (`application/x-protobuf`).

use prost::Message as _;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;

use super::{Connection, Delivered, SendError, SinkError, http};
use crate::otlp::{self, ConvertOptions};
use crate::target::Target;
use crate::window::Window;

/// The path an OTLP HTTP receiver takes profiles on.
pub const PROFILES_PATH: &str = "/v1development/profiles";

/// A client of an OTLP HTTP receiver.
#[derive(Debug)]
pub struct OtlpHttpSink {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: Vec<(String, String)>,
    options: ConvertOptions,
}

impl OtlpHttpSink {
    /// A client of `target`: a base URL (`http://host:4318`, to which [`PROFILES_PATH`] is
    /// appended), or the full URL of the endpoint when it has a path.
    pub fn new(
        target: &Target,
        connection: &Connection,
        options: ConvertOptions,
    ) -> Result<Self, SinkError> {
        let mut url = reqwest::Url::parse(&target.url)
            .map_err(|e| SinkError::Url { url: target.url.clone(), reason: e.to_string() })?;
        if url.path() == "/" || url.path().is_empty() {
            url.set_path(PROFILES_PATH);
        }
        Ok(OtlpHttpSink {
            client: connection
                .tls
                .http_client(connection.request_timeout, connection.connect_timeout)?,
            url,
            headers: connection.request_headers(),
            options,
        })
    }

    /// Exports one window; the request body's size in bytes (gzipped when it is).
    pub async fn send(&self, window: &Window) -> Result<Delivered, SendError> {
        let body = otlp::to_otlp(window, self.options)?.encode_to_vec();
        let mut headers = self.headers.clone();
        let body = if self.options.gzip {
            headers.push(("content-encoding".to_owned(), "gzip".to_owned()));
            gzip(&body)
        } else {
            body
        };
        let (len, response) =
            http::post(&self.client, self.url.clone(), &headers, "application/x-protobuf", body)
                .await?;
        // An empty body is an empty response message, which is a whole success.
        let response =
            ExportProfilesServiceResponse::decode(response.as_slice()).unwrap_or_default();
        Ok(Delivered { bytes: len, partial_rejection: otlp::partial_rejection(&response) })
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail, so neither can this.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}
