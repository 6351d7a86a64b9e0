//! Credentials and extra headers every request carries (HTTP headers, gRPC metadata).

use base64::Engine as _;

/// How the pusher proves who it is.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// `Authorization: Bearer TOKEN`.
    Bearer(String),
    /// `Authorization: Basic base64(USER:PASSWORD)`.
    Basic {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
}

// Credentials never reach a log or a status by accident.
impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Bearer(_) => f.write_str("Bearer(…)"),
            Auth::Basic { user, .. } => write!(f, "Basic {{ user: {user:?}, password: … }}"),
        }
    }
}

impl Auth {
    /// The `Authorization` header's value, if any.
    pub fn header_value(&self) -> Option<String> {
        match self {
            Auth::None => None,
            Auth::Bearer(token) => Some(format!("Bearer {token}")),
            Auth::Basic { user, password } => {
                let encoded =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                Some(format!("Basic {encoded}"))
            }
        }
    }
}

/// Every header a request carries: `authorization` from `auth`, then `extra` (Pyroscope's
/// `X-Scope-OrgID`, a tenant header, …). Names are lower-cased, as HTTP/2 and gRPC metadata
/// require.
pub fn request_headers(auth: &Auth, extra: &[(String, String)]) -> Vec<(String, String)> {
    auth.header_value()
        .map(|v| ("authorization".to_owned(), v))
        .into_iter()
        .chain(extra.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_is_base64_of_user_colon_password() {
        let auth = Auth::Basic { user: "Aladdin".into(), password: "open sesame".into() };
        assert_eq!(auth.header_value().unwrap(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert!(!format!("{auth:?}").contains("sesame"));
        let headers = request_headers(
            &Auth::Bearer("t".into()),
            &[("X-Scope-OrgID".into(), "tenant-1".into())],
        );
        assert_eq!(headers[0], ("authorization".into(), "Bearer t".into()));
        assert_eq!(headers[1], ("x-scope-orgid".into(), "tenant-1".into()));
    }
}
