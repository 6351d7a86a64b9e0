//! What the HTTP sinks share: one POST, and how its outcome is classified.

use reqwest::StatusCode;

use super::SendError;

/// Posts `body` to `url` with `headers`; the body's length on a 2xx.
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
    let response = request.send().await.map_err(|e| SendError::Retryable(describe(&e)))?;
    let status = response.status();
    // The body of an error says why; a large one is cut (its memory is the backend's choice).
    let body = response.bytes().await.map_err(|e| SendError::Retryable(describe(&e)))?;
    if status.is_success() {
        return Ok((len, body.to_vec()));
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
