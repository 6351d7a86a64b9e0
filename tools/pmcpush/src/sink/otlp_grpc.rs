//! OTLP profiles over gRPC: `opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export`,
//! through the client `opentelemetry-proto` generates.

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message as _;
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;

use super::{Connection, Delivered, SendError, SinkError, grpc};
use crate::otlp::{self, ConvertOptions};
use crate::target::Target;
use crate::window::Window;

/// A client of an OTLP gRPC receiver (a collector, or a backend that speaks OTLP).
#[derive(Debug)]
pub struct OtlpGrpcSink {
    client: ProfilesServiceClient<Channel>,
    metadata: MetadataMap,
    options: ConvertOptions,
}

impl OtlpGrpcSink {
    /// A client of `target` (`http://host:4317`).
    pub fn new(
        target: &Target,
        connection: &Connection,
        options: ConvertOptions,
    ) -> Result<Self, SinkError> {
        let mut client = ProfilesServiceClient::new(grpc::channel(target, connection)?);
        if options.gzip {
            client = client.send_compressed(tonic::codec::CompressionEncoding::Gzip);
        }
        Ok(OtlpGrpcSink { client, metadata: grpc::metadata(connection)?, options })
    }

    /// Exports one window; the request's size in bytes (before gRPC's compression).
    ///
    /// A partial success (the receiver dropped some profiles) is reported in the answer.
    pub async fn send(&self, window: &Window) -> Result<Delivered, SendError> {
        let request = otlp::to_otlp(window, self.options)?;
        let len = request.encoded_len() as u64;
        // Clones of a tonic client share the channel.
        let mut client = self.client.clone();
        let response = client
            .export(grpc::request(request, &self.metadata))
            .await
            .map_err(|s| grpc::classify(&s))?;
        Ok(Delivered { bytes: len, partial_rejection: otlp::partial_rejection(response.get_ref()) })
    }
}
