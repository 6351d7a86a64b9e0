//! `pmcstat -F`: a calltree profile in the callgrind format, for KCachegrind and
//! `callgrind_annotate` (format: <https://valgrind.org/docs/manual/cl-format.html>).
//!
//! ```text
//! # callgrind format
//! version: 1
//! creator: pmcstat
//! positions: instr
//! events: INSTR_RETIRED_ANY
//! summary: 100
//!
//! ob=(1) /usr/sim/bin/hot-cold
//! fl=(1) ???
//! fn=(1) hot
//! 0x400000 90
//!
//! fn=(3) main
//! cfn=(1)
//! calls=90 0x400000
//! 0x400090 90
//! ```
//!
//! - One event (cost column) per PMC name that has samples, in the order of
//!   [`Profile::sample_counts`]; PMCs of the same name add up. Event names keep only ASCII
//!   letters, digits and `_` (anything else becomes `_`); a renamed event gets an
//!   `event: NAME : original name` line.
//! - Positions are instruction addresses (`positions: instr`) in the image's link-time addresses
//!   (run-time addresses for images that could not be read), and its object (`ob=`) is the
//!   image. Without line information every function's file is `???`, as callgrind writes for
//!   code without debug information. When the profile has source lines (DWARF of an image or
//!   its debug file), positions are `instr line`: each function gets its source file (`fl=`)
//!   and each cost line the line of its address in that function (for inlined code, the line
//!   of the call that was inlined; 0 when unknown), so KCachegrind and `callgrind_annotate`
//!   annotate the source.
//! - A function is a resolved symbol (its name), or an unresolved address (`0x…`). Its self cost
//!   is the samples taken in it, one cost line per sampled address.
//! - Each caller → callee pair of adjacent frames in a call chain is a call: `cfn=` (after
//!   `cob=` when the callee is in another image), `calls=N TARGET` where TARGET is the callee's
//!   start and N the number of samples (of all events) with this call on the stack, then a cost
//!   line at the call site (the return address) with the inclusive cost: the samples of each
//!   event with this call on the stack. A call that appears several times in one stack
//!   (recursion) counts once for that sample.
//! - Names are compressed (`fn=(N) name` the first time, `fn=(N)` after). Functions are sorted
//!   by image (in the order the log's samples first reach them), start address and name; a
//!   blank line starts each function.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::Arc;

use crate::profile::Profile;
use crate::profile::frame::Location;

/// A function: image, start address, name.
type Function = (Arc<str>, u64, String);

/// What one function collects.
#[derive(Default)]
struct Costs {
    /// Self cost per sampled address.
    own: BTreeMap<u64, Vec<u64>>,
    /// Per (call site, callee): samples with the call, and the inclusive cost per event.
    calls: BTreeMap<(u64, usize), (u64, Vec<u64>)>,
}

/// Writes the calltree profile of every PMC.
pub fn write_calltree(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let counts = profile.sample_counts();
    let mut event_names: Vec<String> =
        counts.iter().filter(|(_, n)| *n > 0).map(|(name, _)| name.clone()).collect();
    if event_names.is_empty() {
        event_names = counts.into_iter().map(|(name, _)| name).collect();
    }
    if event_names.is_empty() {
        event_names.push("samples".to_owned());
    }
    let nevents = event_names.len();

    let mut functions: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<Function, usize> = HashMap::new();
    let mut costs: Vec<Costs> = Vec::new();
    let mut function_of = |location: &Location| -> usize {
        let frame = profile.frame(location.frame);
        let key: Function = match &frame.symbol {
            Some(symbol) => {
                (frame.image.clone(), frame.address - frame.offset.unwrap_or(0), symbol.to_string())
            }
            None => (frame.image.clone(), location.address, format!("{:#x}", location.address)),
        };
        *function_ids.entry(key.clone()).or_insert_with(|| {
            functions.push(key);
            functions.len() - 1
        })
    };
    let mut totals = vec![0u64; nevents];
    for pmc in profile.pmcs() {
        let Some(event) = event_names.iter().position(|n| n == pmc.name()) else { continue };
        for (stack, count) in pmc.location_stacks() {
            let ids: Vec<usize> = stack.iter().map(&mut function_of).collect();
            let Some(&leaf) = ids.first() else { continue };
            if let Some(&newest) = ids.iter().max() {
                if costs.len() <= newest {
                    costs.resize_with(newest + 1, Costs::default);
                }
            }
            totals[event] += count;
            costs[leaf].own.entry(stack[0].address).or_insert_with(|| vec![0; nevents])[event] +=
                count;
            let mut seen = HashSet::new();
            for i in 1..ids.len() {
                let key = (stack[i].address, ids[i - 1]);
                if !seen.insert((ids[i], key)) {
                    continue;
                }
                let call = costs[ids[i]].calls.entry(key).or_insert_with(|| (0, vec![0; nevents]));
                call.0 += count;
                call.1[event] += count;
            }
        }
    }

    let with_lines = profile.has_sources();
    let positions = if with_lines { "instr line" } else { "instr" };
    let mut text =
        format!("# callgrind format\nversion: 1\ncreator: pmcstat\npositions: {positions}\n");
    let names = event_identifiers(&event_names);
    for (name, original) in names.iter().zip(&event_names) {
        if name != original {
            let _ = writeln!(text, "event: {name} : {original}");
        }
    }
    let _ = writeln!(text, "events: {}", names.join(" "));
    let _ = writeln!(text, "summary: {}", join(&totals));

    // Images in the order the log introduces them, then functions by address and name.
    let mut image_rank: HashMap<&Arc<str>, usize> = HashMap::new();
    for frame in profile.frames() {
        let next = image_rank.len();
        image_rank.entry(&frame.image).or_insert(next);
    }
    let mut order: Vec<usize> = (0..functions.len()).collect();
    order.sort_by_key(|&f| (image_rank.get(&functions[f].0), functions[f].1, &functions[f].2));
    let mut objects = Names::default();
    let mut files = Names::default();
    let mut function_names = Names::default();
    let mut current_object: Option<&Arc<str>> = None;
    let mut called_object: Option<&Arc<str>> = None;
    for &f in &order {
        let (image, _, name) = &functions[f];
        let c = &costs[f];
        text.push('\n');
        // The function's own source frame (the outermost) at an address, when known.
        let position = |address: u64| profile.source_in(image, address).last();
        if current_object != Some(image) {
            let _ = writeln!(text, "ob={}", objects.name(image.to_string(), image));
            current_object = Some(image);
            if !with_lines {
                // callgrind_annotate takes a function's file from the last `fl=`; KCachegrind
                // reads it per object. Every function's is `???`.
                let _ = writeln!(text, "fl={}", files.name("???".to_owned(), "???"));
            }
        }
        if with_lines {
            let sites =
                c.own.keys().copied().chain(c.calls.keys().map(|(site, _)| site.wrapping_sub(1)));
            let file = sites.filter_map(|a| position(a)?.file.clone()).next();
            let file = file.as_deref().unwrap_or("???");
            let _ = writeln!(text, "fl={}", files.name(file.to_owned(), file));
        }
        let line = |address: u64| match with_lines {
            true => format!(" {}", position(address).map_or(0, |frame| frame.line)),
            false => String::new(),
        };
        let _ = writeln!(text, "fn={}", function_names.name(f.to_string(), name));
        for (address, cost) in &c.own {
            let _ = writeln!(text, "{address:#x}{} {}", line(*address), join(cost));
        }
        for (&(site, callee), (calls, cost)) in &c.calls {
            let (callee_image, callee_start, callee_name) = &functions[callee];
            // Whether a `cob=` lasts for one call or until the next one, the callee's object
            // is the right one.
            if callee_image != image || called_object.is_some_and(|o| o != callee_image) {
                let _ =
                    writeln!(text, "cob={}", objects.name(callee_image.to_string(), callee_image));
                called_object = Some(callee_image);
            }
            let _ = writeln!(text, "cfn={}", function_names.name(callee.to_string(), callee_name));
            let _ = writeln!(text, "calls={calls} {callee_start:#x}");
            // A call site is a return address: its line is the call's, the byte before.
            let call_line = match with_lines {
                true => {
                    let frame = position(site.wrapping_sub(1)).or_else(|| position(site));
                    format!(" {}", frame.map_or(0, |frame| frame.line))
                }
                false => String::new(),
            };
            let _ = writeln!(text, "{site:#x}{call_line} {}", join(cost));
        }
    }
    out.write_all(text.as_bytes())
}

/// Name compression: `(N) name` the first time an identity is written, `(N)` afterwards.
/// Functions are compressed by their index, so that functions of the same name in different
/// images keep their own ids.
#[derive(Default)]
struct Names {
    ids: HashMap<String, usize>,
}

impl Names {
    fn name(&mut self, identity: String, text: &str) -> String {
        let next = self.ids.len() + 1;
        match self.ids.get(&identity) {
            Some(id) => format!("({id})"),
            None => {
                self.ids.insert(identity, next);
                format!("({next}) {text}")
            }
        }
    }
}

fn join(values: &[u64]) -> String {
    values.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
}

/// Event names as callgrind identifiers: ASCII letters, digits and `_`, not starting with a
/// digit, and distinct (a clash gets `_2`, `_3`, …).
fn event_identifiers(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let mut id: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
            .collect();
        if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
            id.insert(0, '_');
        }
        let mut candidate = id.clone();
        let mut n = 2;
        while out.contains(&candidate) {
            candidate = format!("{id}_{n}");
            n += 1;
        }
        out.push(candidate);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use pmcprof_fixtures::{
        CPU_CLK_UNHALTED_CORE, INSTR_RETIRED_ANY, LogBuilder, Program, hot_warm_main,
    };

    fn calltree(log: &LogBuilder) -> String {
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        write_calltree(&profile, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn calltree_has_self_costs_at_sampled_addresses_and_inclusive_costs_at_call_sites() {
        let p = Program::build(false);
        let at = |f: &str, o: u64| format!("{:#x}", p.at(f, o));
        // Functions by address: hot, warm, cold, main as the C source defines them.
        let expected = format!(
            "# callgrind format\n\
             version: 1\n\
             creator: pmcstat\n\
             positions: instr\n\
             events: INSTR_RETIRED_ANY\n\
             summary: 10\n\
             \n\
             ob=(1) {path}\n\
             fl=(1) ???\n\
             fn=(1) hot\n\
             {hot4} 6\n\
             {hot8} 1\n\
             \n\
             fn=(2) warm\n\
             {warm4} 3\n\
             cfn=(1)\n\
             calls=6 {hot0}\n\
             {warm10} 6\n\
             \n\
             fn=(3) main\n\
             cfn=(2)\n\
             calls=9 {warm0}\n\
             {main20} 9\n\
             cfn=(1)\n\
             calls=1 {hot0}\n\
             {main30} 1\n",
            path = p.log_path(),
            hot0 = at("hot", 0),
            hot4 = at("hot", 4),
            hot8 = at("hot", 8),
            warm0 = at("warm", 0),
            warm4 = at("warm", 4),
            warm10 = at("warm", 10),
            main20 = at("main", 20),
            main30 = at("main", 30),
        );
        assert!(p.at("hot", 0) < p.at("warm", 0) && p.at("warm", 0) < p.at("main", 0));
        assert_eq!(calltree(&hot_warm_main(&p)), expected);
    }

    #[test]
    fn calltree_with_dwarf_has_each_functions_file_and_the_line_of_every_position() {
        let p = Program::build_with_lines(false);
        let opts = ResolveOptions { lines: true, ..ResolveOptions::default() };
        let profile = Profile::from_log(&hot_warm_main(&p).bytes(), &opts).unwrap();
        let mut out = Vec::new();
        write_calltree(&profile, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let source = p.source.display();
        assert!(text.contains("positions: instr line\n"), "{text}");
        let position = |f: &str, o: u64| format!("{:#x} {}", p.at(f, o), p.line_of(p.at(f, o)));
        let expected = format!(
            "ob=(1) {path}\n\
             fl=(1) {source}\n\
             fn=(1) hot\n\
             {hot4} 6\n\
             {hot8} 1\n\
             \n\
             fl=(1)\n\
             fn=(2) warm\n\
             {warm4} 3\n\
             cfn=(1)\n\
             calls=6 {hot0:#x}\n\
             {warm10} 6\n",
            path = p.log_path(),
            hot0 = p.at("hot", 0),
            hot4 = position("hot", 4),
            hot8 = position("hot", 8),
            warm4 = position("warm", 4),
            warm10 = position("warm", 10),
        );
        assert!(text.contains(&expected), "{text}\nwanted:\n{expected}");
        // hot's loop and warm's call are on the lines the C source has them on.
        let line_of = |needle: &str| {
            1 + pmcprof_fixtures::SOURCE.lines().position(|l| l.contains(needle)).unwrap() as u32
        };
        assert_eq!(p.line_of(p.at("warm", 10)), line_of("return hot(x) + 1"));
        assert!(p.line_of(p.at("hot", 8)) >= line_of("int hot(int x)"));
    }

    #[test]
    fn events_are_columns_with_identifier_names() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).allocate(0x200, CPU_CLK_UNHALTED_CORE);
        log.push(&pmclog::Record::PmcAllocateDyn(pmclog::PmcAllocateDyn {
            pmcid: 0x300,
            event: 0x20001,
            flags: 0,
            rate: 1,
            name: b"cpu-clock",
            layout: pmclog::DynLayout::Kernel,
        }));
        log.exec(1, p.log_path(), 0, 0);
        log.samples(1, 0x100, &[p.at("cold", 1)], 2);
        log.samples(1, 0x300, &[p.at("cold", 1)], 5);
        let text = calltree(&log);
        // The event without samples is left out; `cpu-clock` is renamed and described.
        assert!(
            text.contains(
                "positions: instr\nevent: cpu_clock : cpu-clock\n\
                 events: INSTR_RETIRED_ANY cpu_clock\nsummary: 2 5\n"
            ),
            "{text}"
        );
        assert!(text.contains(&format!("fn=(1) cold\n{:#x} 2 5\n", p.at("cold", 1))), "{text}");
        assert_eq!(
            event_identifiers(&[
                "a.b".into(),
                "a_b".into(),
                "9x".into(),
                "(unknown event 0x1)".into()
            ]),
            ["a_b", "a_b_2", "_9x", "_unknown_event_0x1_"]
        );
    }

    #[test]
    fn calls_into_another_image_name_the_callee_object() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(1, p.log_path(), 0, 0);
        log.map_in(1, 0x1000_0000, "/nonexistent/libx.so");
        log.samples(1, 0x100, &[0x1000_0040, p.at("hot", 3), p.at("main", 5)], 2);
        log.samples(1, 0x100, &[p.at("cold", 1), p.at("main", 7)], 1);
        let text = calltree(&log);
        let path = p.log_path();
        let at = |f: &str, o: u64| format!("{:#x}", p.at(f, o));
        let expected_tail = format!(
            "ob=(1) /nonexistent/libx.so\n\
             fl=(1) ???\n\
             fn=(1) 0x10000040\n\
             0x10000040 2\n\
             \n\
             ob=(2) {path}\n\
             fl=(1)\n\
             fn=(2) hot\n\
             cob=(1)\n\
             cfn=(1)\n\
             calls=2 0x10000040\n\
             {hot3} 2\n\
             \n\
             fn=(3) cold\n\
             {cold1} 1\n\
             \n\
             fn=(4) main\n\
             cob=(2)\n\
             cfn=(2)\n\
             calls=2 {hot0}\n\
             {main5} 2\n\
             cfn=(3)\n\
             calls=1 {cold0}\n\
             {main7} 1\n",
            hot0 = at("hot", 0),
            hot3 = at("hot", 3),
            cold0 = at("cold", 0),
            cold1 = at("cold", 1),
            main5 = at("main", 5),
            main7 = at("main", 7),
        );
        assert!(text.ends_with(&expected_tail), "{text}\n---\n{expected_tail}");
    }

    #[test]
    fn a_recursive_call_counts_once_per_sample() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(1, p.log_path(), 0, 0);
        let chain = [p.at("hot", 1), p.at("hot", 9), p.at("hot", 9), p.at("main", 5)];
        log.samples(1, 0x100, &chain, 3);
        let text = calltree(&log);
        let hot_calls =
            format!("cfn=(1)\ncalls=3 {:#x}\n{:#x} 3\n", p.at("hot", 0), p.at("hot", 9));
        assert!(
            text.contains(&format!("fn=(1) hot\n{:#x} 3\n{hot_calls}", p.at("hot", 1))),
            "{text}"
        );
    }
}
