//! TLS with rustls: the system's web PKI roots, plus a custom CA (a fleet's private PKI).

/// How the pusher checks the backend's certificate (for `https` URLs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM certificates of CAs to trust beside the web PKI roots.
    pub ca_pem: Option<Vec<u8>>,
}

/// Why a TLS or HTTP client could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("TLS setup: {0}")]
pub struct TlsError(pub String);

impl TlsConfig {
    /// An HTTP client (rustls) that trusts this configuration's CAs.
    pub(crate) fn http_client(
        &self,
        timeout: std::time::Duration,
        connect_timeout: std::time::Duration,
    ) -> Result<reqwest::Client, TlsError> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(timeout)
            .connect_timeout(connect_timeout)
            // One connection kept per backend at most: the pusher sends one window at a time.
            .pool_max_idle_per_host(1);
        if let Some(pem) = &self.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| TlsError(format!("CA certificates: {e}")))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder.build().map_err(|e| TlsError(e.to_string()))
    }

    /// A gRPC TLS configuration (rustls) that trusts this configuration's CAs.
    pub(crate) fn grpc(&self) -> tonic::transport::ClientTlsConfig {
        let config = tonic::transport::ClientTlsConfig::new().with_webpki_roots();
        match &self.ca_pem {
            Some(pem) => config.ca_certificate(tonic::transport::Certificate::from_pem(pem)),
            None => config,
        }
    }
}
