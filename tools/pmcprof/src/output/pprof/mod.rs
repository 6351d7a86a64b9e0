//! A gzipped pprof profile (`profile.proto`, as `go tool pprof` and other pprof readers take
//! it), built with the types prost generates from google/pprof's `proto/profile.proto`
//! (`tools/pmcprof/proto/`; a test checks that `perftools.profiles.rs` is what prost makes of it).
//!
//! - `sample_type[0]` is `samples`/`count`: every sample of every PMC. When the log has more than
//!   one PMC name, one `NAME`/`count` column per name follows (in the order of
//!   [`Profile::sample_counts`]), each sample carrying its count in its PMC's column (0 in the
//!   others). When clock events sampled (the Linux host's `cpu-clock` and `task-clock`, whose
//!   rate counts ticks, [`PmcProfile::clock_period_ns`]), a `cpu`/`nanoseconds` column follows:
//!   each sample's count times its PMC's period; `period_type`/`period` say the period when
//!   there is one. `default_sample_type` is `samples`.
//! - Addresses are link-time addresses (what `nm` and `objdump` print, the same in every process
//!   that maps the image), so tools can symbolise and disassemble them again from the files:
//!   one mapping per image with its code's extent (`memory_start`, `memory_limit`), the file
//!   offset of that start, the file name and the build ID; the measured command (the log's
//!   first PROCEXEC) is `mapping[0]`, the main binary. Addresses that no readable image covers
//!   keep their run-time value, in a mapping of their image name with no extent.
//! - One location per sampled address (not per function), with its source lines when the
//!   profile has them, innermost inlined function first (pprof's order); otherwise one line
//!   naming the function (an unresolved frame's function is its address, `0x401136`).
//! - One function per (name, source file).
//! - `time_nanos` is when the log was configured; `duration_nanos` comes from the first and last
//!   sample's TSC and the TSC frequency, when both are known.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message as _;

use crate::profile::frame::Location;
use crate::profile::{PmcProfile, Profile};

/// The messages of `profile.proto` (package `perftools.profiles`), as prost generates them.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub(crate) mod proto {
    include!("perftools.profiles.rs");
}

/// Writes the profile as a gzipped pprof `Profile` message.
pub fn write_pprof(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let bytes = build_profile(profile).encode_to_vec();
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

/// The `Profile` message.
pub(crate) fn build_profile(profile: &Profile) -> proto::Profile {
    let mut out = proto::Profile::default();
    let mut strings = Strings::default();

    let names: Vec<String> = profile.sample_counts().into_iter().map(|(n, _)| n).collect();
    let per_name = names.len() > 1;
    let periods: Vec<Option<u64>> =
        profile.pmcs().iter().map(PmcProfile::clock_period_ns).collect();
    let clock = periods.iter().any(Option::is_some);
    let mut types = vec![("samples", "count")];
    if per_name {
        types.extend(names.iter().map(|n| (n.as_str(), "count")));
    }
    if clock {
        types.push(("cpu", "nanoseconds"));
    }
    out.sample_type = types
        .iter()
        .map(|(ty, unit)| proto::ValueType { r#type: strings.id(ty), unit: strings.id(unit) })
        .collect();
    let mut distinct_periods: Vec<u64> = periods.iter().flatten().copied().collect();
    distinct_periods.dedup();
    if let [period] = distinct_periods[..] {
        out.period_type =
            Some(proto::ValueType { r#type: strings.id("cpu"), unit: strings.id("nanoseconds") });
        out.period = i64::try_from(period).unwrap_or(i64::MAX);
    }

    let mut tables = Tables::new(profile);

    // Samples: identical stacks of different PMCs become one sample with several values.
    let columns = types.len();
    let mut samples: HashMap<&[Location], Vec<i64>> = HashMap::new();
    let mut order: Vec<&[Location]> = Vec::new();
    for (pmc, period) in profile.pmcs().iter().zip(&periods) {
        let column = names.iter().position(|n| n == pmc.name()).map_or(0, |i| i + 1);
        for (stack, count) in pmc.location_stacks() {
            let values = samples.entry(stack).or_insert_with(|| {
                order.push(stack);
                vec![0; columns]
            });
            let count = i64::try_from(count).unwrap_or(i64::MAX);
            values[0] += count;
            if per_name {
                values[column] += count;
            }
            if let Some(period) = period {
                let nanos = count.saturating_mul(i64::try_from(*period).unwrap_or(i64::MAX));
                values[columns - 1] = values[columns - 1].saturating_add(nanos);
            }
        }
    }
    for stack in order {
        let location_id = stack.iter().map(|l| tables.location(l, &mut strings)).collect();
        out.sample.push(proto::Sample {
            location_id,
            value: samples[stack].clone(),
            label: Vec::new(),
        });
    }
    out.mapping = tables.mappings(&mut strings);
    out.location = tables.locations;
    out.function = tables.functions;

    out.comment = vec![strings.id("generated by pmcstat from a pmclog file")];
    out.default_sample_type = strings.id("samples");
    let info = profile.info();
    out.time_nanos = i64::try_from(info.start_time_ns).unwrap_or(0);
    if let (Some((first, last)), freq) = (info.tsc_range, info.tsc_freq) {
        if freq != 0 {
            let nanos = u128::from(last - first) * 1_000_000_000 / u128::from(freq);
            out.duration_nanos = i64::try_from(nanos).unwrap_or(i64::MAX);
        }
    }
    out.string_table = strings.table;
    out
}

/// Locations, functions and the images they are in, numbered as they are first met.
struct Tables<'p> {
    profile: &'p Profile,
    locations: Vec<proto::Location>,
    location_ids: HashMap<Location, u64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<(Arc<str>, Option<Arc<str>>), u64>,
    /// Images in mapping order (the main binary first), with whether their locations have
    /// functions and source lines.
    images: Vec<(Arc<str>, MappingUse)>,
    image_ids: HashMap<Arc<str>, u64>,
}

#[derive(Default, Clone, Copy)]
struct MappingUse {
    functions: bool,
    lines: bool,
    inlined: bool,
}

impl<'p> Tables<'p> {
    fn new(profile: &'p Profile) -> Tables<'p> {
        let mut tables = Tables {
            profile,
            locations: Vec::new(),
            location_ids: HashMap::new(),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            images: Vec::new(),
            image_ids: HashMap::new(),
        };
        // The main binary is mapping 1 even when no sample fell in it.
        if let Some(main) = profile.main_image() {
            tables.mapping_id(main);
        }
        tables
    }

    fn mapping_id(&mut self, image: &Arc<str>) -> u64 {
        let next = self.images.len() as u64 + 1;
        *self.image_ids.entry(image.clone()).or_insert_with(|| {
            self.images.push((image.clone(), MappingUse::default()));
            next
        })
    }

    fn function_id(&mut self, name: &str, file: Option<&Arc<str>>, strings: &mut Strings) -> u64 {
        let next = self.functions.len() as u64 + 1;
        let key = (Arc::from(name), file.cloned());
        *self.function_ids.entry(key).or_insert_with(|| {
            let name = strings.id(name);
            self.functions.push(proto::Function {
                id: next,
                name,
                system_name: name,
                filename: file.map_or(0, |f| strings.id(f)),
                start_line: 0,
            });
            next
        })
    }

    fn location(&mut self, location: &Location, strings: &mut Strings) -> u64 {
        if let Some(&id) = self.location_ids.get(location) {
            return id;
        }
        let frame = self.profile.frame(location.frame);
        let mapping_id = self.mapping_id(&frame.image);
        let sources = self.profile.source(location);
        let fallback = frame.symbol.as_deref().map_or_else(|| frame.name(), str::to_owned);
        let line: Vec<proto::Line> = if sources.is_empty() {
            vec![proto::Line { function_id: self.function_id(&fallback, None, strings), line: 0 }]
        } else {
            sources
                .iter()
                .map(|source| {
                    let name = source.function.as_deref().unwrap_or(&fallback);
                    let function_id = self.function_id(name, source.file.as_ref(), strings);
                    proto::Line { function_id, line: i64::from(source.line) }
                })
                .collect()
        };
        let used = &mut self.images[mapping_id as usize - 1].1;
        used.functions |= frame.symbol.is_some();
        used.lines |= !sources.is_empty();
        used.inlined |= sources.len() > 1;
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id,
            address: location.address,
            line,
            is_folded: false,
        });
        self.location_ids.insert(*location, id);
        id
    }

    fn mappings(&self, strings: &mut Strings) -> Vec<proto::Mapping> {
        self.images
            .iter()
            .enumerate()
            .map(|(index, (image, used))| {
                let info = self.profile.image_info(image);
                proto::Mapping {
                    id: index as u64 + 1,
                    memory_start: info.map_or(0, |i| i.text.start),
                    memory_limit: info.map_or(0, |i| i.text.end),
                    file_offset: info.map_or(0, |i| i.text_offset),
                    filename: strings.id(image),
                    build_id: info
                        .and_then(|i| i.build_id.as_deref())
                        .map_or(0, |id| strings.id(id)),
                    has_functions: used.functions,
                    has_filenames: used.lines,
                    has_line_numbers: used.lines,
                    has_inline_frames: used.inlined,
                }
            })
            .collect()
    }
}

/// The string table; index 0 is the empty string.
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Default for Strings {
    fn default() -> Strings {
        Strings { table: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use object::{Object, ObjectSection};

    use super::*;
    use crate::ResolveOptions;
    use pmcprof_fixtures::{CPU_CLK_UNHALTED_CORE, LogBuilder, Program, go_pprof, hot_warm_main};

    /// The profile written by [`write_pprof`], gunzipped and decoded with the generated types.
    fn decode(profile: &Profile) -> proto::Profile {
        let mut gz = Vec::new();
        write_pprof(profile, &mut gz).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
        proto::Profile::decode(&raw[..]).unwrap()
    }

    fn string(p: &proto::Profile, id: i64) -> &str {
        &p.string_table[id as usize]
    }

    /// Each sample as (function names of its locations' outermost lines, values).
    fn named_samples(p: &proto::Profile) -> Vec<(Vec<String>, Vec<i64>)> {
        let function = |id: u64| string(p, p.function[id as usize - 1].name).to_owned();
        let mut samples: Vec<(Vec<String>, Vec<i64>)> = p
            .sample
            .iter()
            .map(|s| {
                let names = s
                    .location_id
                    .iter()
                    .map(|&id| {
                        function(p.location[id as usize - 1].line.last().unwrap().function_id)
                    })
                    .collect();
                (names, s.value.clone())
            })
            .collect();
        samples.sort();
        samples
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pprof_has_each_sampled_address_as_a_location_in_its_images_mapping() {
        let p = Program::build(false);
        let profile =
            Profile::from_log(&hot_warm_main(&p).bytes(), &ResolveOptions::default()).unwrap();
        let msg = decode(&profile);
        assert_eq!(msg.string_table[0], "");
        let types: Vec<(&str, &str)> = msg
            .sample_type
            .iter()
            .map(|t| (string(&msg, t.r#type), string(&msg, t.unit)))
            .collect();
        assert_eq!(types, [("samples", "count")]);
        assert_eq!(string(&msg, msg.default_sample_type), "samples");
        assert_eq!(
            named_samples(&msg),
            vec![
                (names(&["hot", "main"]), vec![1]),
                (names(&["hot", "warm", "main"]), vec![6]),
                (names(&["warm", "main"]), vec![3]),
            ]
        );
        // Locations are the exact sampled addresses.
        let mut addresses: Vec<u64> = msg.location.iter().map(|l| l.address).collect();
        addresses.sort();
        let mut expected: Vec<u64> =
            [("hot", 4), ("hot", 8), ("warm", 4), ("warm", 10), ("main", 20), ("main", 30)]
                .iter()
                .map(|&(f, o)| p.at(f, o))
                .collect();
        expected.sort();
        assert_eq!(addresses, expected);

        // The program is the main binary, mapped as its ELF file lays out its code.
        let data = std::fs::read(&p.path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let init = file.section_by_name(".init").unwrap();
        let fini = file.section_by_name(".fini").unwrap();
        assert_eq!(msg.mapping.len(), 1);
        let m = &msg.mapping[0];
        assert_eq!((m.id, string(&msg, m.filename)), (1, p.log_path()));
        assert_eq!(
            (m.memory_start, m.memory_limit),
            (init.address(), fini.address() + fini.size())
        );
        assert_eq!(m.file_offset, init.file_range().unwrap().0);
        let build_id: String =
            file.build_id().unwrap().unwrap().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(string(&msg, m.build_id), build_id);
        assert!(m.has_functions && !m.has_line_numbers);
        assert!(msg.location.iter().all(|l| l.mapping_id == 1));

        assert_eq!(msg.time_nanos, 1_000_000_000_005);
        // 13 records at 1000 TSC ticks each; samples are records 4 to 13; TSC at 1 GHz.
        assert_eq!(msg.duration_nanos, 9000);
    }

    #[test]
    fn a_mapping_of_an_image_linked_by_lld_or_mold_gives_its_codes_file_offset() {
        for linker in ["lld", "mold"] {
            let Some(p) = Program::build_linked(linker, true, false) else { continue };
            let bias = 0x7f00_0000_0000;
            let mut log = LogBuilder::new();
            let start = Program::map_in_start(&p.path, bias);
            log.allocate(0x100, CPU_CLK_UNHALTED_CORE).map_in(1, start, p.log_path());
            log.samples(1, 0x100, &[bias + p.at("hot", 2)], 1);
            let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
            let msg = decode(&profile);
            let data = std::fs::read(&p.path).unwrap();
            let file = object::File::parse(&*data).unwrap();
            let first_code = file
                .sections()
                .filter(|s| s.kind() == object::SectionKind::Text && s.size() > 0)
                .min_by_key(|s| s.address())
                .unwrap();
            let (offset, _) = first_code.file_range().unwrap();
            assert_ne!(offset, first_code.address(), "{linker}: a GNU ld layout");
            let m = &msg.mapping[0];
            assert_eq!((m.memory_start, m.file_offset), (first_code.address(), offset), "{linker}");
            assert_eq!(msg.location[0].address, p.at("hot", 2), "{linker}");
        }
    }

    #[test]
    fn pprof_has_one_value_column_per_pmc_name_when_there_are_several() {
        let p = Program::build(false);
        let mut log = hot_warm_main(&p);
        log.allocate(0x200, CPU_CLK_UNHALTED_CORE);
        log.samples(100, 0x200, &[p.at("warm", 4), p.at("main", 20)], 5);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let msg = decode(&profile);
        let types: Vec<&str> = msg.sample_type.iter().map(|t| string(&msg, t.r#type)).collect();
        assert_eq!(types, ["samples", "INSTR_RETIRED_ANY", "CPU_CLK_UNHALTED_CORE"]);
        let mut values: Vec<Vec<i64>> = msg.sample.iter().map(|s| s.value.clone()).collect();
        values.sort();
        assert_eq!(values, vec![vec![1, 1, 0], vec![6, 6, 0], vec![8, 3, 5]]);
        assert_eq!(msg.period_type, None, "no clock event");
    }

    #[test]
    fn clock_event_samples_are_also_cpu_nanoseconds() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.push(&pmclog::Record::PmcAllocateDyn(pmclog::PmcAllocateDyn {
            pmcid: 0x300,
            event: 0x20001,
            flags: 0,
            rate: 3_000_000,
            name: b"cpu-clock",
            layout: pmclog::DynLayout::Kernel,
        }));
        log.exec(1, p.log_path(), 0, 0);
        log.samples(1, 0x300, &[p.at("cold", 1)], 5);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let msg = decode(&profile);
        let types: Vec<(&str, &str)> = msg
            .sample_type
            .iter()
            .map(|t| (string(&msg, t.r#type), string(&msg, t.unit)))
            .collect();
        assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
        // Every 3 ms: 5 samples are 15 ms of CPU time.
        assert_eq!(named_samples(&msg), vec![(names(&["cold"]), vec![5, 15_000_000])]);
        let period_type = msg.period_type.as_ref().unwrap();
        assert_eq!((string(&msg, period_type.r#type), msg.period), ("cpu", 3_000_000));
    }

    #[test]
    fn pprof_locations_have_their_source_lines_with_dwarf() {
        let p = Program::build_with_lines(false);
        let opts = ResolveOptions { lines: true, ..ResolveOptions::default() };
        let profile = Profile::from_log(&hot_warm_main(&p).bytes(), &opts).unwrap();
        let msg = decode(&profile);
        let source = p.source.to_str().unwrap();
        for (function, offset) in [("hot", 4), ("warm", 10), ("main", 30)] {
            let address = p.at(function, offset);
            let location = msg.location.iter().find(|l| l.address == address).unwrap();
            assert_eq!(location.line.len(), 1, "nothing inlined at -O0");
            let line = &location.line[0];
            assert_eq!(line.line, i64::from(p.line_of(address)));
            let f = &msg.function[line.function_id as usize - 1];
            assert_eq!((string(&msg, f.name), string(&msg, f.filename)), (function, source));
        }
        let m = &msg.mapping[0];
        assert!(m.has_functions && m.has_filenames && m.has_line_numbers && !m.has_inline_frames);
    }

    #[test]
    fn the_main_binary_is_the_first_mapping_even_when_another_image_comes_first() {
        let p = Program::build(false);
        let lib = Program::build(true);
        let mut log = LogBuilder::new();
        log.allocate(0x100, pmcprof_fixtures::INSTR_RETIRED_ANY);
        log.exec(1, p.log_path(), 0, 0);
        log.map_in(1, 0x7f00_0000_0000, lib.log_path());
        log.samples(1, 0x100, &[0x7f00_0000_0000 + lib.at("cold", 1)], 2);
        log.samples(1, 0x100, &[p.at("cold", 1)], 1);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let msg = decode(&profile);
        let files: Vec<&str> = msg.mapping.iter().map(|m| string(&msg, m.filename)).collect();
        assert_eq!(files, [p.log_path(), lib.log_path()]);
    }

    #[test]
    fn go_tool_pprof_reads_the_functions_source_lines_and_code() {
        let p = Program::build_with_lines(false);
        let opts = ResolveOptions { lines: true, ..ResolveOptions::default() };
        let profile = Profile::from_log(&hot_warm_main(&p).bytes(), &opts).unwrap();
        let file = p._dir.path().join("prof.pb.gz");
        write_pprof(&profile, &mut std::fs::File::create(&file).unwrap()).unwrap();
        let Some(top) = go_pprof(&["-top"], &file) else { return };
        let flat = |name: &str| {
            top.lines()
                .find(|l| l.split_whitespace().last() == Some(name))
                .map(|l| l.split_whitespace().next().unwrap().to_owned())
        };
        assert_eq!(flat("hot").as_deref(), Some("7"), "{top}");
        assert_eq!(flat("warm").as_deref(), Some("3"), "{top}");
        // -list shows hot's source with its samples on their lines.
        let list = go_pprof(&["-list", "^hot$"], &file).unwrap();
        let hot_line = p.line_of(p.at("hot", 4));
        let row = list
            .lines()
            .find(|l| l.trim_end().contains(&format!("{hot_line}:")))
            .unwrap_or_else(|| panic!("line {hot_line} in {list}"));
        assert!(row.split_whitespace().next().unwrap().parse::<u32>().unwrap() >= 1, "{row}");
        // -disasm disassembles the program from its file, at the profile's addresses.
        let disasm = go_pprof(&["-disasm", "hot"], &file).unwrap();
        assert!(disasm.contains(&format!("{:x}:", p.at("hot", 4))), "{disasm}");
    }

    #[test]
    fn the_pprof_types_are_what_prost_generates_from_profile_proto() {
        let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");
        let descriptors = protox::compile(["profile.proto"], [proto_dir]).unwrap();
        let out = tempfile::tempdir().unwrap();
        prost_build::Config::new().out_dir(out.path()).compile_fds(descriptors).unwrap();
        let generated = std::fs::read_to_string(out.path().join("perftools.profiles.rs")).unwrap();
        let committed = include_str!("perftools.profiles.rs");
        assert!(
            generated == committed,
            "regenerate src/output/pprof/perftools.profiles.rs from proto/profile.proto"
        );
    }
}
