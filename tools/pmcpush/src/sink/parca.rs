//! Parca's `parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw`: the pprof bytes as they
//! are, with the labels that name their series.

use tonic::metadata::MetadataMap;
use tonic::transport::Channel;

use super::{Connection, Delivered, SendError, SinkError, grpc, series_labels};
use crate::target::Target;
use crate::window::{Window, WindowMeta};

/// Parca's profile store messages and service (generated from
/// `proto/parca_profilestore.proto`).
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/parca.profilestore.v1alpha1.rs"));
}

/// A client of a Parca server.
#[derive(Debug)]
pub struct ParcaSink {
    client: proto::profile_store_service_client::ProfileStoreServiceClient<Channel>,
    metadata: MetadataMap,
}

impl ParcaSink {
    /// A client of `target` (`http://host:7070`).
    pub fn new(target: &Target, connection: &Connection) -> Result<Self, SinkError> {
        Ok(ParcaSink {
            client: proto::profile_store_service_client::ProfileStoreServiceClient::new(
                grpc::channel(target, connection)?,
            ),
            metadata: grpc::metadata(connection)?,
        })
    }

    /// Writes one window; the profile's size in bytes.
    pub async fn send(&self, window: &Window) -> Result<Delivered, SendError> {
        let request = proto::WriteRawRequest {
            tenant: String::new(),
            series: vec![proto::RawProfileSeries {
                labels: Some(proto::LabelSet {
                    labels: labels(&window.meta)
                        .into_iter()
                        .map(|(name, value)| proto::Label { name, value })
                        .collect(),
                }),
                samples: vec![proto::RawSample { raw_profile: window.profile.to_vec() }],
            }],
            // pmcstat writes link-time addresses, which are what Parca calls normalised.
            normalized: true,
        };
        let mut client = self.client.clone();
        client
            .write_raw(grpc::request(request, &self.metadata))
            .await
            .map_err(|s| grpc::classify(&s))?;
        Ok(Delivered::whole(window.profile.len() as u64))
    }
}

/// `__name__` (the event, as a Prometheus-style name), `service_name`, then the series labels
/// with their keys made Prometheus label names (`host.name` → `host_name`).
pub fn labels(meta: &WindowMeta) -> Vec<(String, String)> {
    let mut labels = vec![
        ("__name__".to_owned(), super::label_name(&meta.event)),
        ("service_name".to_owned(), meta.resource.service_name()),
    ];
    labels.extend(series_labels(meta));
    labels
}
