//! What the gRPC sinks share: the channel, request metadata, and how a status is classified.

use tonic::Code;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::{Channel, Endpoint};

use super::{Connection, SendError, SinkError};
use crate::target::Target;

/// A channel to `target` that connects on first use and again after a failure.
pub(super) fn channel(target: &Target, connection: &Connection) -> Result<Channel, SinkError> {
    let bad_url = |reason: String| SinkError::Url { url: target.url.clone(), reason };
    let mut endpoint = Endpoint::from_shared(target.url.clone())
        .map_err(|e| bad_url(e.to_string()))?
        .timeout(connection.request_timeout)
        .connect_timeout(connection.connect_timeout);
    if target.is_https() {
        endpoint =
            endpoint.tls_config(connection.tls.grpc()).map_err(|e| bad_url(e.to_string()))?;
    }
    Ok(endpoint.connect_lazy())
}

/// The connection's headers as gRPC metadata.
pub(super) fn metadata(connection: &Connection) -> Result<MetadataMap, SinkError> {
    let mut map = MetadataMap::new();
    for (name, value) in connection.request_headers() {
        let key: AsciiMetadataKey = name.parse().map_err(|_| SinkError::Header(name.clone()))?;
        let value: AsciiMetadataValue =
            value.parse().map_err(|_| SinkError::Header(name.clone()))?;
        map.insert(key, value);
    }
    Ok(map)
}

/// A request carrying `message` and `metadata`.
pub(super) fn request<T>(message: T, metadata: &MetadataMap) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    *request.metadata_mut() = metadata.clone();
    request
}

/// Statuses that say "later" (the server is down, slow, overloaded or restarting) are retried;
/// the others say the request itself is wrong.
pub(super) fn classify(status: &tonic::Status) -> SendError {
    let message = format!("gRPC {:?}: {}", status.code(), status.message());
    match status.code() {
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::Cancelled
        | Code::Unknown
        | Code::Internal => SendError::Retryable(message),
        _ => SendError::Rejected(message),
    }
}
