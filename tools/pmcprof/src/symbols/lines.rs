//! Source positions from DWARF: the file and line of an address, and the functions inlined at
//! it, read with `addr2line` from the image or its separate debug file.

use std::path::Path;
use std::sync::Arc;

use object::{Object, ObjectSection};

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// One frame of source at an address: the innermost (an inlined function's body) first, the
/// function the address is in last.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceFrame {
    /// The function, demangled; `None` when DWARF does not name it.
    pub function: Option<Arc<str>>,
    /// The source file as DWARF names it (usually absolute).
    pub file: Option<Arc<str>>,
    /// The line, 0 when unknown.
    pub line: u32,
}

/// The DWARF of one ELF file, parsed as addresses are asked for.
pub(crate) struct SourceLines {
    /// `addr2line` parses units lazily through cells, so the context is not `Sync`: the lock
    /// lets an image be shared (it is uncontended: one profile is built on one thread).
    context: std::sync::Mutex<addr2line::Context<Reader>>,
}

impl std::fmt::Debug for SourceLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceLines")
    }
}

impl SourceLines {
    /// Reads the DWARF sections of the ELF file at `path` (decompressing them when needed);
    /// `None` when it has no line information.
    pub(crate) fn load(path: &Path) -> Option<SourceLines> {
        let (file, _) = super::image_file::open(path).ok()?;
        let cache = object::ReadCache::new(file);
        let object = object::File::parse(&cache).ok()?;
        object.section_by_name(".debug_line")?;
        let endian = if object.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            let data = object
                .section_by_name(id.name())
                .and_then(|section| section.uncompressed_data().ok())
                .map(|data| Arc::<[u8]>::from(&*data))
                .unwrap_or_else(|| Arc::from(&[][..]));
            Ok(gimli::EndianArcSlice::new(data, endian))
        };
        let dwarf = gimli::Dwarf::load(load).ok()?;
        let context = addr2line::Context::from_dwarf(dwarf).ok()?;
        Some(SourceLines { context: std::sync::Mutex::new(context) })
    }

    /// The source frames at the link-time address `addr`, innermost first; empty when DWARF
    /// does not cover it.
    pub(crate) fn frames_at(&self, addr: u64) -> Vec<SourceFrame> {
        let mut found = Vec::new();
        let context = self.context.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Ok(mut frames) = context.find_frames(addr).skip_all_loads() else {
            return found;
        };
        while let Ok(Some(frame)) = frames.next() {
            let function = frame
                .function
                .as_ref()
                .and_then(|name| name.raw_name().ok())
                .map(|name| Arc::from(super::demangle::demangle(&name).as_str()));
            let (file, line) = match &frame.location {
                Some(location) => (location.file.map(Arc::from), location.line.unwrap_or(0)),
                None => (None, 0),
            };
            found.push(SourceFrame { function, file, line });
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r#"
static inline __attribute__((always_inline)) int square(int x) {
    return x * x;
}
__attribute__((noinline)) int outer(int x) {
    int s = 0;
    for (int i = 0; i < x; i++)
        s += square(i);
    return s;
}
int main(int argc, char **argv) { (void)argv; return outer(argc); }
"#;

    #[test]
    fn an_address_has_its_file_line_and_the_functions_inlined_there() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("inl.c");
        std::fs::write(&source, SOURCE).unwrap();
        let binary = dir.path().join("inl");
        let status = std::process::Command::new("gcc")
            .args(["-g", "-O1", "-o"])
            .arg(&binary)
            .arg(&source)
            .status()
            .unwrap();
        assert!(status.success());
        let functions = pmcprof_fixtures::functions_of(&binary);
        let lines = SourceLines::load(&binary).expect("DWARF with lines");
        let (start, size) = functions["outer"];
        let file = source.to_str().unwrap();
        // Some address of outer is square's inlined multiplication (line 3), inside outer's loop
        // (line 8).
        let inlined = (start..start + size)
            .map(|addr| lines.frames_at(addr))
            .find(|frames| frames.len() == 2)
            .expect("an address with an inlined frame");
        assert_eq!(inlined[0].function.as_deref(), Some("square"));
        assert_eq!((inlined[0].file.as_deref(), inlined[0].line), (Some(file), 3));
        assert_eq!(inlined[1].function.as_deref(), Some("outer"));
        assert_eq!((inlined[1].file.as_deref(), inlined[1].line), (Some(file), 8));
        // Every address of outer as binutils' addr2line reads it (`-f -i`: function, then
        // file:line, innermost first).
        let addresses: Vec<String> = (start..start + size).map(|a| format!("{a:#x}")).collect();
        let output = std::process::Command::new("addr2line")
            .args(["-f", "-i", "-e"])
            .arg(&binary)
            .args(&addresses)
            .output()
            .unwrap();
        assert!(output.status.success());
        let text = String::from_utf8(output.stdout).unwrap();
        let mut binutils = text.lines();
        for addr in start..start + size {
            let ours = lines.frames_at(addr);
            for frame in &ours {
                let function = binutils.next().unwrap();
                let position = binutils.next().unwrap();
                let position = position.split(" (discriminator").next().unwrap();
                let expected = format!("{file}:{}", frame.line);
                assert_eq!((frame.function.as_deref(), position), (Some(function), &*expected));
            }
        }
        assert_eq!(binutils.next(), None, "binutils saw the same number of frames");
        assert!(lines.frames_at(1).is_empty(), "no code at address 1");
    }

    #[test]
    fn a_file_without_dwarf_has_no_source_lines() {
        let p = pmcprof_fixtures::Program::build(false);
        assert!(SourceLines::load(&p.path).is_none());
    }
}
