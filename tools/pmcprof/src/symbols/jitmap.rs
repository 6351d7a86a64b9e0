//! Code a JIT compiler generated, named by perf's convention: the process writes
//! `/tmp/perf-PID.map`, one line per function, `START SIZE name` (START and SIZE in hex, without
//! `0x`; the name is the rest of the line), as Python 3.12's `-X perf`, Node's
//! `--perf-basic-prof`, the JVM's perf-map-agent and LuaJIT write it. The file outlives the
//! process, so a log is read with the names its processes gave their code.
//!
//! Or in a jitdump file (`jit-PID.dump`, perf's binary format, as the JVM's agent, Python
//! 3.12's `-X perf_jit` and LuaJIT write it), which the JIT maps executable so that its path is
//! in the log's MAP_IN records: its code-load records name each function at its address, and
//! code-move records move one.

use std::path::{Path, PathBuf};

use super::image::Image;

/// The path of process `pid`'s map file (under `fsroot` when given).
pub(crate) fn path(fsroot: Option<&Path>, pid: i32) -> PathBuf {
    let file = format!("tmp/perf-{pid}.map");
    fsroot.unwrap_or(Path::new("/")).join(file)
}

/// The functions `(start, end, name)` of the map file at `path` and of the jitdump files
/// `dumps`, as an image of absolute addresses; `None` if they name no function. Files that are
/// missing or no regular files are left out.
pub(crate) fn read(path: &Path, dumps: &[PathBuf]) -> Option<Image> {
    let map = read_regular(path).map(|bytes| parse(&String::from_utf8_lossy(&bytes)));
    let mut functions = map.unwrap_or_default();
    for dump in dumps {
        functions.extend(read_regular(dump).map(|bytes| parse_dump(&bytes)).unwrap_or_default());
    }
    Image::from_symbols(functions)
}

/// Whether `path` names a jitdump file: `jit-PID.dump`.
pub(crate) fn is_dump(path: &[u8]) -> bool {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let digits = name.strip_prefix(b"jit-").and_then(|n| n.strip_suffix(b".dump"));
    digits.is_some_and(|d| !d.is_empty() && d.iter().all(u8::is_ascii_digit))
}

/// The bytes of the file at `path` if it is a regular file (anyone could have put a FIFO
/// there: opened non-blocking, checked after opening).
fn read_regular(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut { file }, &mut bytes).ok()?;
    Some(bytes)
}

/// The magic number that starts a jitdump file, in the writer's byte order.
const DUMP_MAGIC: u32 = 0x4A69_5444;
/// Record types: a function's code loaded, and moved.
const JIT_CODE_LOAD: u32 = 0;
const JIT_CODE_MOVE: u32 = 1;

/// The functions a jitdump file's records leave: each code-load record's
/// `(code_addr, code_addr + code_size, name)`, moved by the code-move records after it. Reading
/// stops at the first record that does not fit (a file still being written ends mid-record).
fn parse_dump(bytes: &[u8]) -> Vec<(u64, u64, String)> {
    let mut functions: Vec<(u64, u64, String)> = Vec::new();
    let Some(magic) = bytes.get(..4) else { return functions };
    let little = match magic.try_into().map(u32::from_le_bytes) {
        Ok(DUMP_MAGIC) => true,
        Ok(m) if m.swap_bytes() == DUMP_MAGIC => false,
        _ => return functions,
    };
    let word = |at: usize| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) })
    };
    let quad = |at: usize| -> Option<u64> {
        let b: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if little { u64::from_le_bytes(b) } else { u64::from_be_bytes(b) })
    };
    // The header says its own size (8 in `total_size`'s place: magic, version, total_size).
    let Some(mut at) = word(8).map(|size| size as usize) else { return functions };
    while let (Some(id), Some(size)) = (word(at), word(at + 4)) {
        let size = size as usize;
        let Some(end) = at.checked_add(size).filter(|&end| size >= 16 && end <= bytes.len()) else {
            break;
        };
        // The body follows the 16-byte header (id, total_size, timestamp): pid, tid, vma.
        let body = at + 16;
        match id {
            JIT_CODE_LOAD => {
                let (Some(code), Some(length)) = (quad(body + 16), quad(body + 24)) else { break };
                let name_at = body + 40;
                let name = bytes.get(name_at..end).unwrap_or_default();
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                if let Some(stop) = code.checked_add(length).filter(|_| length > 0) {
                    functions.push((code, stop, String::from_utf8_lossy(name).into_owned()));
                }
            }
            JIT_CODE_MOVE => {
                let (Some(old), Some(new)) = (quad(body + 16), quad(body + 24)) else { break };
                if let Some(f) = functions.iter_mut().rev().find(|f| f.0 == old) {
                    let length = f.1 - f.0;
                    if let Some(stop) = new.checked_add(length) {
                        (f.0, f.1) = (new, stop);
                    }
                }
            }
            _ => {}
        }
        at = end;
    }
    functions
}

/// The `(start, end, name)` of each well-formed line of a map file, the last of each start.
fn parse(text: &str) -> Vec<(u64, u64, String)> {
    let mut functions: Vec<(u64, u64, String)> = text
        .lines()
        .filter_map(|line| {
            let (start, rest) = line.trim_start().split_once(' ')?;
            let (size, name) = rest.trim_start().split_once(' ')?;
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let (start, size) = (hex(start)?, hex(size)?);
            let name = name.trim();
            (size > 0 && !name.is_empty())
                .then(|| Some((start, start.checked_add(size)?, name.to_owned())))
                .flatten()
        })
        .collect();
    // Stable: of the lines with one start, the last stays last, and is the one kept.
    functions.sort_by_key(|f| f.0);
    let mut kept: Vec<(u64, u64, String)> = Vec::with_capacity(functions.len());
    for function in functions {
        match kept.last_mut() {
            Some(last) if last.0 == function.0 => *last = function,
            _ => kept.push(function),
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_lines_give_functions_and_bad_lines_are_skipped() {
        let text = "7f0000001000 40 jitted_hot_loop\n\
                    7f0000002000 0x10 py::f:/a b.py\n\
                    not a line\n\
                    7f0000003000 0 empty\n\
                    7f0000001000 20 recompiled\n";
        assert_eq!(
            parse(text),
            [
                (0x7f00_0000_1000, 0x7f00_0000_1020, "recompiled".to_owned()),
                (0x7f00_0000_2000, 0x7f00_0000_2010, "py::f:/a b.py".to_owned()),
            ]
        );
    }

    /// A jitdump file as a little-endian writer lays it out: its header, then `records` of
    /// `(id, body)`.
    pub(crate) fn dump(records: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for word in [DUMP_MAGIC, 1, 40, 62, 0, 42] {
            bytes.extend(word.to_le_bytes());
        }
        bytes.extend([0u64, 0].iter().flat_map(|q| q.to_le_bytes()));
        for (id, body) in records {
            bytes.extend(id.to_le_bytes());
            bytes.extend((16 + body.len() as u32).to_le_bytes());
            bytes.extend(7u64.to_le_bytes());
            bytes.extend(body);
        }
        bytes
    }

    /// The body of a code-load record of `name` at `code` (`size` bytes of code, not copied).
    pub(crate) fn code_load(code: u64, size: u64, name: &str) -> (u32, Vec<u8>) {
        let mut body = Vec::new();
        body.extend([42u32, 43].iter().flat_map(|w| w.to_le_bytes()));
        body.extend([code, code, size, 1].iter().flat_map(|q| q.to_le_bytes()));
        body.extend(name.as_bytes());
        body.push(0);
        (JIT_CODE_LOAD, body)
    }

    #[test]
    fn a_jitdump_names_the_code_it_loaded_where_it_was_moved() {
        let mut moved = Vec::new();
        moved.extend([42u32, 43].iter().flat_map(|w| w.to_le_bytes()));
        moved.extend([0x1000u64, 0x1000, 0x9000, 0x10, 2].iter().flat_map(|q| q.to_le_bytes()));
        let bytes = dump(&[
            code_load(0x1000, 0x10, "first"),
            (5, vec![0; 8]),
            code_load(0x2000, 0x20, "second"),
            (JIT_CODE_MOVE, moved),
        ]);
        let expected =
            [(0x9000, 0x9010, "first".to_owned()), (0x2000, 0x2020, "second".to_owned())];
        assert_eq!(parse_dump(&bytes), expected);
        // A file cut anywhere gives the records before the cut, and never panics.
        for len in 0..bytes.len() {
            let functions = parse_dump(&bytes[..len]);
            assert!(functions.len() <= 2, "{len}");
        }
        assert!(parse_dump(b"not a jitdump file at all......................").is_empty());
        assert!(is_dump(b"/home/u/.debug/jit/java-jit-2024/jit-1234.dump"));
        assert!(!is_dump(b"/tmp/jit-.dump") && !is_dump(b"/tmp/jit-12.dumpx"));
    }

    #[test]
    fn only_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("perf-1.map");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(
            read(&fifo, std::slice::from_ref(&fifo)).is_none(),
            "a FIFO is never opened for reading"
        );
        let file = dir.path().join("perf-2.map");
        std::fs::write(&file, "1000 10 f\n").unwrap();
        let image = read(&file, &[]).unwrap();
        assert_eq!(&*image.symbol_at(0x1008).unwrap().name, "f");
        assert!(image.symbol_at(0x1010).is_none());
    }
}
