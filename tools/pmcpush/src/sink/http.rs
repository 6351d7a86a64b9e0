//! What the HTTP sinks share: one POST, and how its outcome is classified.

use reqwest::StatusCode;

use super::SendError;

/// The most of a response the pusher reads.
const MAX_RESPONSE_BYTES: usize = 64 << 10;

/// Posts `body` to `url` with `headers`; on a 2xx, the body's length and (up to
/// [`MAX_RESPONSE_BYTES`]) the response.
pub(super) async fn post(
    client: &reqwest::Client,
    url: reqwest::Url,
    headers: &[(String, String)],
    content_type: &str,
    body: Vec<u8>,
) -> Result<(u64, Vec<u8>), SendError> {
    let len = body.len() as u64;
    let mut request = client.post(url).header("content-type", content_type).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let mut response = request.send().await.map_err(|e| SendError::Retryable(describe(&e)))?;
    let status = response.status();
    // The answer (an OTLP response, or an error's text) is read up to a bound: its size is the
    // backend's choice, the pusher's memory is not. The rest is left unread.
    let mut body = Vec::new();
    while body.len() < MAX_RESPONSE_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) if status.is_success() => return Err(SendError::Retryable(describe(&e))),
            Err(_) => break,
        }
    }
    body.truncate(MAX_RESPONSE_BYTES);
    if status.is_success() {
        return Ok((len, body));
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(512)]).trim().to_owned();
    let message = format!("HTTP {status}: {text}");
    Err(if is_retryable(status) {
        SendError::Retryable(message)
    } else {
        SendError::Rejected(message)
    })
}

/// 408 (timeout), 429 (too many requests) and 5xx say "later"; any other 4xx says "never".
pub(super) fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
}

/// The error and its causes on one line (reqwest's own text omits the cause, such as
/// "connection refused").
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_timeouts_throttling_and_server_errors_are_retried() {
        for (code, retry) in [
            (400, false),
            (401, false),
            (404, false),
            (408, true),
            (413, false),
            (429, true),
            (500, true),
            (503, true),
        ] {
            assert_eq!(is_retryable(StatusCode::from_u16(code).unwrap()), retry, "{code}");
        }
    }
}
