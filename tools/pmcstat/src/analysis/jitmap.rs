//! Code a JIT compiler generated, named by perf's convention: the process writes
//! `/tmp/perf-PID.map`, one line per function, `START SIZE name` (START and SIZE in hex, without
//! `0x`; the name is the rest of the line), as Python 3.12's `-X perf`, Node's
//! `--perf-basic-prof`, the JVM's perf-map-agent and LuaJIT write it. The file outlives the
//! process, so a log is read with the names its processes gave their code.

use std::path::{Path, PathBuf};

use super::image::Image;

/// The path of process `pid`'s map file (under `fsroot` when given).
pub(crate) fn path(fsroot: Option<&Path>, pid: i32) -> PathBuf {
    let file = format!("tmp/perf-{pid}.map");
    fsroot.unwrap_or(Path::new("/")).join(file)
}

/// The functions of the map file at `path`, as an image of absolute addresses; `None` if there
/// is no such regular file or it names no function. Malformed lines are skipped, and a later
/// line for the same start replaces an earlier one (a JIT that recompiles writes both).
pub(crate) fn read(path: &Path) -> Option<Image> {
    use std::os::unix::fs::OpenOptionsExt;
    // A map file anyone could have put there: a regular file only, opened non-blocking.
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut { file }, &mut text).ok()?;
    Image::from_symbols(parse(&text))
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

    #[test]
    fn only_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("perf-1.map");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(read(&fifo).is_none(), "a FIFO is never opened for reading");
        let file = dir.path().join("perf-2.map");
        std::fs::write(&file, "1000 10 f\n").unwrap();
        let image = read(&file).unwrap();
        assert_eq!(&*image.symbol_at(0x1008).unwrap().name, "f");
        assert!(image.symbol_at(0x1010).is_none());
    }
}
