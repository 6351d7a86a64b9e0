//! pprof → OTLP profiles (`opentelemetry.proto.profiles.v1development`, the version the
//! `opentelemetry-proto` crate ships).
//!
//! - One OTLP `Profile` per pprof sample type (OTLP profiles have one sample type each); they
//!   share one `ProfilesDictionary`. A sample whose value in a column is 0 is left out of that
//!   column's profile (pmcstat writes one column per PMC, 0 in the others).
//! - Mappings keep their extent, file offset and file name; the build ID becomes the mapping
//!   attribute `process.executable.build_id.gnu` (pmcstat's build IDs are ELF GNU build IDs), so
//!   a backend can symbolise the addresses again from its own copy of the binary.
//! - Locations keep their address and lines (innermost inlined function first, as in pprof),
//!   functions their name, system name, file and start line; stacks are deduplicated.
//! - pprof sample labels become sample attributes; the window's labels become profile
//!   attributes; its resource attributes the OTLP resource.
//! - `time_unix_nano`/`duration_nano` are the window's; `period_type`/`period` are the
//!   profile's, or else the window's event (`EVENT`/`count`) and period.

use std::collections::HashMap;

use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development as otlp;
use opentelemetry_proto::tonic::resource::v1::Resource as OtlpResource;

use crate::pprof::{self, DecodeError, proto};
use crate::window::{AttributeValue, Resource, Window};

/// The mapping attribute that carries a GNU build ID (hex).
pub const BUILD_ID_ATTRIBUTE: &str = "process.executable.build_id.gnu";

/// The instrumentation scope name the profiles carry.
pub const SCOPE_NAME: &str = "pmcpush";

/// How windows are converted and sent as OTLP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Also send the window's pprof bytes as the first profile's `original_payload` (format
    /// `pprof`): twice the bytes, for backends that want to keep the original.
    pub include_original_pprof: bool,
    /// Gzip the request (gRPC message compression; HTTP `Content-Encoding: gzip`): about a
    /// third of the bytes. Off by default, as in OTLP exporters: a receiver must accept gzip.
    pub gzip: bool,
}

/// The OTLP export request for one window.
pub fn to_otlp(
    window: &Window,
    options: ConvertOptions,
) -> Result<ExportProfilesServiceRequest, DecodeError> {
    let profile = pprof::decode(&window.profile)?;
    Ok(convert(&profile, window, options))
}

/// The OTLP export request for `profile`, described by `window`'s meta.
pub fn convert(
    profile: &proto::Profile,
    window: &Window,
    options: ConvertOptions,
) -> ExportProfilesServiceRequest {
    let meta = &window.meta;
    let mut dict = Dictionary::new();
    let string = |i: i64| -> &str {
        usize::try_from(i).ok().and_then(|i| profile.string_table.get(i)).map_or("", |s| s)
    };

    let mut mapping_index = HashMap::new();
    for m in &profile.mapping {
        let build_id = string(m.build_id);
        let attribute_indices = if build_id.is_empty() {
            Vec::new()
        } else {
            vec![dict.attribute(BUILD_ID_ATTRIBUTE, &AttributeValue::String(build_id.into()), "")]
        };
        let mapping = otlp::Mapping {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename_strindex: dict.string(string(m.filename)),
            attribute_indices,
        };
        mapping_index.insert(m.id, push(&mut dict.table.mapping_table, mapping));
    }

    let mut function_index = HashMap::new();
    for f in &profile.function {
        let function = otlp::Function {
            name_strindex: dict.string(string(f.name)),
            system_name_strindex: dict.string(string(f.system_name)),
            filename_strindex: dict.string(string(f.filename)),
            start_line: f.start_line,
        };
        function_index.insert(f.id, push(&mut dict.table.function_table, function));
    }

    let mut location_index = HashMap::new();
    for l in &profile.location {
        let location = otlp::Location {
            mapping_index: mapping_index.get(&l.mapping_id).copied().unwrap_or(0),
            address: l.address,
            lines: l
                .line
                .iter()
                .map(|line| otlp::Line {
                    function_index: function_index.get(&line.function_id).copied().unwrap_or(0),
                    line: line.line,
                    column: 0,
                })
                .collect(),
            attribute_indices: Vec::new(),
        };
        location_index.insert(l.id, push(&mut dict.table.location_table, location));
    }

    // The stack and label attributes of each pprof sample, computed once for all columns.
    let samples: Vec<(i32, Vec<i32>)> = profile
        .sample
        .iter()
        .map(|s| {
            let stack: Vec<i32> = s
                .location_id
                .iter()
                .map(|id| location_index.get(id).copied().unwrap_or(0))
                .collect();
            let attributes = s
                .label
                .iter()
                .map(|l| {
                    let value = if l.str != 0 {
                        AttributeValue::String(string(l.str).to_owned())
                    } else {
                        AttributeValue::Int(l.num)
                    };
                    dict.attribute(string(l.key), &value, string(l.num_unit))
                })
                .collect();
            (dict.stack(stack), attributes)
        })
        .collect();

    let columns: Vec<(String, String)> = if profile.sample_type.is_empty() {
        vec![(meta.sample_type.kind.clone(), meta.sample_type.unit.clone())]
    } else {
        profile
            .sample_type
            .iter()
            .map(|t| (string(t.r#type).to_owned(), string(t.unit).to_owned()))
            .collect()
    };
    let period_type = match &profile.period_type {
        Some(t) => otlp::ValueType {
            type_strindex: dict.string(string(t.r#type)),
            unit_strindex: dict.string(string(t.unit)),
        },
        None => otlp::ValueType {
            type_strindex: dict.string(&meta.event),
            unit_strindex: dict.string("count"),
        },
    };
    let period = if profile.period != 0 {
        profile.period
    } else {
        meta.period.and_then(|p| i64::try_from(p).ok()).unwrap_or(0)
    };
    let profile_attributes: Vec<i32> = meta
        .labels
        .iter()
        .map(|(k, v)| dict.attribute(k, &AttributeValue::String(v.clone()), ""))
        .collect();

    let mut profiles = Vec::with_capacity(columns.len());
    for (column, (kind, unit)) in columns.iter().enumerate() {
        let sample_type =
            otlp::ValueType { type_strindex: dict.string(kind), unit_strindex: dict.string(unit) };
        let samples = profile
            .sample
            .iter()
            .zip(&samples)
            .filter_map(|(s, (stack_index, attributes))| {
                let value = s.value.get(column).copied().unwrap_or(0);
                (value != 0).then(|| otlp::Sample {
                    stack_index: *stack_index,
                    attribute_indices: attributes.clone(),
                    link_index: 0,
                    values: vec![value],
                    timestamps_unix_nano: Vec::new(),
                })
            })
            .collect();
        let original = options.include_original_pprof && column == 0;
        profiles.push(otlp::Profile {
            sample_type: Some(sample_type),
            samples,
            time_unix_nano: meta.start_unix_nanos(),
            duration_nano: u64::try_from(meta.duration().as_nanos()).unwrap_or(u64::MAX),
            period_type: Some(period_type),
            period,
            profile_id: rand::random::<[u8; 16]>().to_vec(),
            dropped_attributes_count: 0,
            original_payload_format: if original { "pprof".into() } else { String::new() },
            original_payload: if original { window.profile.to_vec() } else { Vec::new() },
            attribute_indices: profile_attributes.clone(),
        });
    }

    ExportProfilesServiceRequest {
        resource_profiles: vec![otlp::ResourceProfiles {
            resource: Some(resource(&meta.resource)),
            scope_profiles: vec![otlp::ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: SCOPE_NAME.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dict.table),
    }
}

/// What an export response's partial success says, when the receiver refused part of the
/// request.
pub fn partial_rejection(response: &ExportProfilesServiceResponse) -> Option<String> {
    let partial = response.partial_success.as_ref()?;
    (partial.rejected_profiles != 0 || !partial.error_message.is_empty()).then(|| {
        format!(
            "the backend kept the window but rejected {} profile(s): {}",
            partial.rejected_profiles, partial.error_message
        )
    })
}

/// The OTLP resource of `resource`'s attributes.
pub fn resource(resource: &Resource) -> OtlpResource {
    OtlpResource {
        attributes: resource
            .attributes()
            .iter()
            .map(|(key, value)| KeyValue {
                key: key.clone(),
                value: Some(any_value(value)),
                key_strindex: 0,
            })
            .collect(),
        ..Default::default()
    }
}

fn any_value(value: &AttributeValue) -> AnyValue {
    AnyValue {
        value: Some(match value {
            AttributeValue::String(s) => any_value::Value::StringValue(s.clone()),
            AttributeValue::Int(n) => any_value::Value::IntValue(*n),
        }),
    }
}

/// Appends `item` and returns its index (dictionaries are far below `i32::MAX` entries: a
/// window's profile is at most [`pprof::MAX_DECODED_BYTES`]).
fn push<T>(table: &mut Vec<T>, item: T) -> i32 {
    table.push(item);
    i32::try_from(table.len() - 1).unwrap_or(i32::MAX)
}

/// The shared dictionary being built, with the indices of what it already holds.
struct Dictionary {
    table: otlp::ProfilesDictionary,
    strings: HashMap<String, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(i32, String, i32), i32>,
}

impl Dictionary {
    /// Every table starts with its zero value, which index 0 means ("none").
    fn new() -> Self {
        let table = otlp::ProfilesDictionary {
            mapping_table: vec![otlp::Mapping::default()],
            location_table: vec![otlp::Location::default()],
            function_table: vec![otlp::Function::default()],
            link_table: vec![otlp::Link::default()],
            string_table: vec![String::new()],
            attribute_table: vec![otlp::KeyValueAndUnit::default()],
            stack_table: vec![otlp::Stack::default()],
        };
        Dictionary {
            table,
            strings: HashMap::from([(String::new(), 0)]),
            stacks: HashMap::from([(Vec::new(), 0)]),
            attributes: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = push(&mut self.table.string_table, s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i =
            push(&mut self.table.stack_table, otlp::Stack { location_indices: locations.clone() });
        self.stacks.insert(locations, i);
        i
    }

    fn attribute(&mut self, key: &str, value: &AttributeValue, unit: &str) -> i32 {
        let key = self.string(key);
        let unit = self.string(unit);
        let identity = match value {
            AttributeValue::String(s) => format!("s{s}"),
            AttributeValue::Int(n) => format!("i{n}"),
        };
        if let Some(&i) = self.attributes.get(&(key, identity.clone(), unit)) {
            return i;
        }
        let entry = otlp::KeyValueAndUnit {
            key_strindex: key,
            value: Some(any_value(value)),
            unit_strindex: unit,
        };
        let i = push(&mut self.table.attribute_table, entry);
        self.attributes.insert((key, identity, unit), i);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowMeta;
    use prost::Message as _;
    use std::time::{Duration, UNIX_EPOCH};

    /// main → work, sampled 3 times in `samples` and 300 in `cpu`; main alone once.
    fn profile() -> proto::Profile {
        let strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "work", "/bin/app"];
        let strings: Vec<String> = strings.iter().map(|s| s.to_string()).collect();
        let build_id = strings.len() as i64;
        proto::Profile {
            string_table: strings.into_iter().chain(["abcdef".to_string()]).collect(),
            sample_type: vec![
                proto::ValueType { r#type: 1, unit: 2 },
                proto::ValueType { r#type: 3, unit: 4 },
            ],
            mapping: vec![proto::Mapping {
                id: 9,
                memory_start: 0x1000,
                memory_limit: 0x2000,
                filename: 7,
                build_id,
                ..Default::default()
            }],
            function: vec![
                proto::Function { id: 1, name: 5, ..Default::default() },
                proto::Function { id: 2, name: 6, ..Default::default() },
            ],
            location: vec![
                proto::Location {
                    id: 10,
                    mapping_id: 9,
                    address: 0x1100,
                    line: vec![proto::Line { function_id: 1, line: 3 }],
                    ..Default::default()
                },
                proto::Location {
                    id: 20,
                    mapping_id: 9,
                    address: 0x1200,
                    line: vec![proto::Line { function_id: 2, line: 7 }],
                    ..Default::default()
                },
            ],
            sample: vec![
                proto::Sample { location_id: vec![20, 10], value: vec![3, 300], label: vec![] },
                proto::Sample { location_id: vec![10], value: vec![1, 0], label: vec![] },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn one_profile_per_sample_type_over_one_dictionary() {
        let start = UNIX_EPOCH + Duration::from_secs(100);
        let mut meta = WindowMeta::new(start, start + Duration::from_secs(10), "cycles", "app");
        meta.period = Some(65536);
        let window = Window::new(profile().encode_to_vec(), meta);
        let request = to_otlp(&window, ConvertOptions::default()).unwrap();
        let dict = request.dictionary.as_ref().unwrap();
        let s = |i: i32| dict.string_table[i as usize].as_str();
        let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(profiles.len(), 2);
        let kinds: Vec<_> =
            profiles.iter().map(|p| s(p.sample_type.unwrap().type_strindex)).collect();
        assert_eq!(kinds, ["samples", "cpu"]);
        let values: Vec<Vec<i64>> =
            profiles.iter().map(|p| p.samples.iter().map(|s| s.values[0]).collect()).collect();
        assert_eq!(values, [vec![3, 1], vec![300]]);
        // The leaf first: work, then main.
        let stack = &dict.stack_table[profiles[1].samples[0].stack_index as usize];
        let names: Vec<_> = stack
            .location_indices
            .iter()
            .map(|&l| {
                let f = dict.location_table[l as usize].lines[0].function_index;
                s(dict.function_table[f as usize].name_strindex)
            })
            .collect();
        assert_eq!(names, ["work", "main"]);
        let mapping = &dict.mapping_table[1];
        assert_eq!((mapping.memory_start, s(mapping.filename_strindex)), (0x1000, "/bin/app"));
        let build_id = &dict.attribute_table[mapping.attribute_indices[0] as usize];
        assert_eq!(s(build_id.key_strindex), BUILD_ID_ATTRIBUTE);
        assert_eq!(
            build_id.value.as_ref().unwrap().value,
            Some(any_value::Value::StringValue("abcdef".into()))
        );
        assert_eq!(profiles[0].time_unix_nano, 100_000_000_000);
        assert_eq!(profiles[0].duration_nano, 10_000_000_000);
        assert_eq!(
            (s(profiles[0].period_type.unwrap().type_strindex), profiles[0].period),
            ("cycles", 65536)
        );
        // Every table starts with its zero value.
        assert_eq!(dict.string_table[0], "");
        assert_eq!(dict.stack_table[0], otlp::Stack::default());
    }
}
