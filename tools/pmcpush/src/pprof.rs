//! Reading a window's pprof bytes: the `perftools.profiles` messages (generated from
//! `tools/pmcprof/proto/profile.proto`) and a decoder that takes them gzipped or not, bounded in size.

use std::io::Read;

use flate2::read::GzDecoder;
use prost::Message as _;

/// The messages of `profile.proto` (package `perftools.profiles`), as prost generates them.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}

/// The largest decompressed profile the pusher reads: the pusher's memory stays bounded even
/// when a window's bytes are a gzip bomb.
pub const MAX_DECODED_BYTES: u64 = 256 << 20;

/// Why a window's bytes are not a profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The gzip stream is broken.
    #[error("the profile's gzip stream is broken: {0}")]
    Gzip(#[source] std::io::Error),
    /// Decompressed, the profile is larger than [`MAX_DECODED_BYTES`].
    #[error("the profile is larger than {MAX_DECODED_BYTES} bytes once decompressed")]
    TooLarge,
    /// The bytes are not a `Profile` message.
    #[error("not a pprof profile: {0}")]
    Protobuf(#[from] prost::DecodeError),
}

/// Whether `bytes` start as a gzip stream does.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Decodes a pprof profile, gzipped or not.
pub fn decode(bytes: &[u8]) -> Result<proto::Profile, DecodeError> {
    if !is_gzip(bytes) {
        return Ok(proto::Profile::decode(bytes)?);
    }
    let mut raw = Vec::new();
    GzDecoder::new(bytes)
        .take(MAX_DECODED_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(DecodeError::Gzip)?;
    if raw.len() as u64 > MAX_DECODED_BYTES {
        return Err(DecodeError::TooLarge);
    }
    Ok(proto::Profile::decode(raw.as_slice())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    #[test]
    fn reads_plain_and_gzipped_profiles() {
        let p = proto::Profile {
            string_table: vec![String::new(), "samples".into(), "count".into()],
            sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
            ..Default::default()
        };
        let plain = p.encode_to_vec();
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&plain).unwrap();
        let gzipped = gz.finish().unwrap();
        assert_eq!(decode(&plain).unwrap(), p);
        assert_eq!(decode(&gzipped).unwrap(), p);
        assert!(matches!(decode(&[0x1f, 0x8b, 0, 1]), Err(DecodeError::Gzip(_))));
        assert!(matches!(decode(&[0xff, 0xff]), Err(DecodeError::Protobuf(_))));
    }
}
