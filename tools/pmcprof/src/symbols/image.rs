//! Executable images: what the analysis needs from an ELF file (how it is laid out in memory and
//! its function symbols), read once per path with the `object` crate.
//!
//! Symbols come from the image's own symbol table, else from its separate debug file
//! ([`super::debuginfo`]), else from its dynamic symbols; code that no symbol covers is still
//! grouped into functions by the image's `.eh_frame` (every function a compiler emits unwind
//! information for has a frame description entry, stripped or not), named `image+0xOFFSET`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::debuginfo::{Check, DebugLinks, DebugSearch, debuglink_crc};
use super::demangle::PLT_SUFFIX;
use super::lines::{SourceFrame, SourceLines};

use object::{
    Object, ObjectKind, ObjectSection, ObjectSegment, ObjectSymbol, SectionFlags, SegmentFlags,
    SymbolKind,
};

/// A function symbol: `[start, end)` in the image's link-time addresses.
#[derive(Debug, Clone)]
pub(crate) struct Symbol {
    /// First address.
    pub(crate) start: u64,
    /// One past the last address.
    pub(crate) end: u64,
    /// The name as stored in the symbol table (mangled).
    pub(crate) name: Name,
}

/// A symbol's name: its own string, or a slice of a whole symbol table kept in memory once (a
/// kernel's ~100 000 names then cost no allocation each).
#[derive(Debug, Clone)]
pub(crate) enum Name {
    /// A name of its own.
    Own(Arc<str>),
    /// `table[at..at + len]`.
    In {
        /// The table.
        table: Arc<String>,
        /// Where the name starts.
        at: u32,
        /// Its length.
        len: u32,
    },
}

impl Name {
    pub(crate) fn new(name: &str) -> Name {
        Name::Own(Arc::from(name))
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Name::Own(name) => name,
            Name::In { table, at, len } => {
                table.get(*at as usize..(*at + *len) as usize).unwrap_or_default()
            }
        }
    }
}

/// An ELF image, as far as symbol resolution needs it.
#[derive(Debug)]
pub(crate) struct Image {
    /// `ET_EXEC`: the image runs at its link-time addresses. Otherwise (`ET_DYN`: shared objects
    /// and PIE executables) it is relocated as a whole.
    pub(crate) fixed: bool,
    /// Link-time address of file offset 0: the lowest `PT_LOAD` segment's address minus its
    /// file offset (0 for ordinary shared objects and PIEs).
    pub(crate) link_base: u64,
    /// Bytes from `link_base` to the end of the highest `PT_LOAD` segment.
    pub(crate) span: u64,
    /// The `PT_LOAD` segments, by file offset: how file offsets and link-time addresses
    /// correspond. GNU ld keeps the two a constant distance apart; LLD and mold do not (a
    /// segment's address is its offset plus a page or more per segment before it), so a file
    /// offset is made an address through the segment holding it.
    segments: Vec<LoadSegment>,
    /// The program interpreter (`PT_INTERP`, from `.interp`) of a dynamically linked executable.
    pub(crate) interp: Option<Vec<u8>>,
    /// `[start, end)` of the executable code in link-time addresses: from the lowest to the
    /// highest allocated section with `SHF_EXECINSTR` (FreeBSD pmcstat's `pi_start` / `pi_end`),
    /// else the executable (`PF_X`) `PT_LOAD` segments; `None` when there is no code.
    pub(crate) text: Option<(u64, u64)>,
    /// Function symbols sorted by start; zero-sized ones reach to the next symbol.
    symbols: Vec<Symbol>,
    /// Instead of `symbols`: a sorted symbol table searched in place (see
    /// [`SORTED_KALLSYMS_HEADER`]), for a kernel's ~100 000 symbols.
    sorted_table: Option<Arc<String>>,
    /// Functions known only from `.eh_frame` (`[start, end)`, sorted, not overlapping), for
    /// addresses no symbol covers: read from `file` the first time such an address is looked up
    /// (most images are named by their symbols alone, and `.eh_frame` is large).
    unwind_functions: std::sync::OnceLock<Vec<(u64, u64)>>,
    /// The image's file, for what is read from it later.
    file: Option<PathBuf>,
    /// What unnamed functions are called after: the image file's name (`libz.so.1`).
    label: Arc<str>,
    /// The separate debug file the symbols were read from.
    pub(crate) debug_file: Option<PathBuf>,
    /// The `NT_GNU_BUILD_ID` note.
    pub(crate) build_id: Option<Vec<u8>>,
    /// Whether `symbols` come from a full symbol table (`.symtab`), not dynamic symbols only.
    has_symbol_table: bool,
    /// The file whose DWARF gives source lines (the debug file, else the image itself).
    dwarf_file: Option<PathBuf>,
    /// Its DWARF, read the first time a source line is asked for.
    source_lines: std::sync::OnceLock<Option<SourceLines>>,
}

/// One `PT_LOAD` segment: the file bytes `[offset, offset + file_size)` are at the link-time
/// addresses `[address, address + file_size)`, and the segment reaches `memory_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LoadSegment {
    offset: u64,
    file_size: u64,
    address: u64,
    memory_size: u64,
}

/// The first line of a kernel symbol table in the form the analysis searches without parsing
/// it: then every line is `<address as 16 hex digits> <name>`, one per address, by address.
pub(crate) const SORTED_KALLSYMS_HEADER: &str = "# hwpmc-rs sorted text symbols v1\n";

impl Image {
    /// Reads and parses the ELF file at `path`, reading only the parts it needs (headers,
    /// symbol and string tables): images carry debug information many times that size.
    ///
    /// The path comes from a log, which anyone may have written: only a regular file is read.
    /// A FIFO, device or directory is refused before it is opened (opening a FIFO blocks until
    /// a writer comes), and the file is opened non-blocking and checked again, in case the
    /// path was replaced in between.
    #[cfg(test)]
    pub(crate) fn load(path: &Path) -> Result<Image, String> {
        Image::load_with(path, None, &DebugSearch::default())
    }

    /// Reads the ELF file at `path` (under `fsroot` when given) as [`Image::load`] does and, if
    /// it has no symbol table of its own, the symbols of its separate debug file as `search`
    /// finds it.
    pub(crate) fn load_with(
        path: &Path,
        fsroot: Option<&Path>,
        search: &DebugSearch,
    ) -> Result<Image, String> {
        let failed = |e: std::io::Error| format!("{}: {e}", path.display());
        let (file, len) = super::image_file::open(path)?;
        // Small images are read at once (one read instead of one per symbol name); large ones,
        // which carry debug information many times the size of their symbols, on demand.
        let parsed = if len <= READ_WHOLE_IMAGE {
            let data = super::image_file::read_all(file, len).map_err(failed)?;
            Image::parse_with_links(&*data)
        } else {
            Image::parse_with_links(&object::ReadCache::new(file))
        };
        let (mut image, links) = parsed.map_err(|e| format!("{}: {e}", path.display()))?;
        image.file = Some(path.to_owned());
        if let Some(name) = path.file_name() {
            image.label = Arc::from(name.to_string_lossy().as_ref());
        }
        if !image.has_symbol_table {
            for (candidate, check) in search.candidates(path, fsroot, &links) {
                if let Some(symbols) = debug_file_symbols(&candidate, check, &links) {
                    image.use_debug_symbols(symbols, candidate);
                    break;
                }
            }
        }
        image.dwarf_file = Some(image.debug_file.clone().unwrap_or_else(|| path.to_owned()));
        Ok(image)
    }

    /// An image that has no file, described by its function symbols (start, end, name) at the
    /// absolute addresses it runs at: the simulator's programs.
    pub(crate) fn from_symbols(functions: Vec<(u64, u64, String)>) -> Option<Image> {
        let low = functions.iter().map(|f| f.0).min()?;
        let high = functions.iter().map(|f| f.1).max()?;
        let mut symbols: Vec<Symbol> = functions
            .into_iter()
            .map(|(start, end, name)| Symbol { start, end, name: Name::new(&name) })
            .collect();
        symbols.sort_by_key(|s| s.start);
        Some(Image::absolute(low, high, symbols, None))
    }

    /// An image of code at absolute addresses `[low, high)` (no file layout to relocate), with
    /// its symbols as a list or as a sorted table searched in place.
    fn absolute(low: u64, high: u64, symbols: Vec<Symbol>, sorted: Option<Arc<String>>) -> Image {
        Image {
            fixed: true,
            link_base: low,
            span: high - low,
            segments: Vec::new(),
            interp: None,
            text: Some((low, high)),
            symbols,
            sorted_table: sorted,
            unwind_functions: std::sync::OnceLock::new(),
            file: None,
            label: Arc::from("image"),
            debug_file: None,
            build_id: None,
            has_symbol_table: true,
            dwarf_file: None,
            source_lines: std::sync::OnceLock::new(),
        }
    }

    /// A Linux kernel described by a `/proc/kallsyms`-style text symbol table (`address type
    /// name [module]` lines): its text symbols at their absolute addresses, each reaching to the
    /// next. `None` if the table has no text symbol with an address (a kernel hiding its
    /// addresses lists them as 0).
    pub(crate) fn from_kallsyms(table: String) -> Option<Image> {
        if let Some(sorted) = table.strip_prefix(SORTED_KALLSYMS_HEADER) {
            let first = sorted.lines().next().and_then(sorted_line)?.0;
            let last = sorted.lines().next_back().and_then(sorted_line)?.0;
            return Some(Image::absolute(first, last + 4096, Vec::new(), Some(Arc::new(table))));
        }
        let shared = Arc::new(table);
        let base = shared.as_ptr() as usize;
        let mut starts: Vec<(u64, u32, u32)> = shared
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_ascii_whitespace();
                let address = u64::from_str_radix(fields.next()?, 16).ok()?;
                let kind = fields.next()?;
                let name = fields.next()?;
                let text = matches!(kind, "t" | "T" | "w" | "W");
                let at = u32::try_from(name.as_ptr() as usize - base).ok()?;
                (text && address != 0).then_some((address, at, name.len() as u32))
            })
            .collect();
        starts.sort_by_key(|&(address, ..)| address);
        starts.dedup_by_key(|&mut (address, ..)| address);
        let (low, last) = (starts.first()?.0, starts.last()?.0);
        let ends = starts.iter().skip(1).map(|&(a, ..)| a).chain([last + 4096]);
        let symbols = starts
            .iter()
            .zip(ends)
            .map(|(&(start, at, len), end)| Symbol {
                start,
                end,
                name: Name::In { table: shared.clone(), at, len },
            })
            .collect();
        Some(Image::absolute(low, last + 4096, symbols, None))
    }

    /// Parses an ELF file held in memory (or read on demand through a `ReadRef`).
    #[cfg(test)]
    pub(crate) fn parse<'data, R: object::ReadRef<'data>>(data: R) -> Result<Image, String> {
        Image::parse_with_links(data).map(|(image, _)| image)
    }

    /// Parses an ELF file, and says what it names of its separate debug file.
    fn parse_with_links<'data, R: object::ReadRef<'data>>(
        data: R,
    ) -> Result<(Image, DebugLinks), String> {
        let file = object::File::parse(data).map_err(|e| format!("not an object file: {e}"))?;
        if file.format() != object::BinaryFormat::Elf {
            return Err(format!("{:?} is not ELF", file.format()));
        }
        let fixed = file.kind() == ObjectKind::Executable;
        let mut link_base = u64::MAX;
        let mut high = 0u64;
        let mut segments = Vec::new();
        for segment in file.segments() {
            let (offset, file_size) = segment.file_range();
            link_base = link_base.min(segment.address().saturating_sub(offset));
            high = high.max(segment.address().saturating_add(segment.size()));
            let (address, memory_size) = (segment.address(), segment.size());
            segments.push(LoadSegment { offset, file_size, address, memory_size });
        }
        segments.sort_by_key(|s| s.offset);
        if link_base == u64::MAX {
            return Err("no loadable segments".to_owned());
        }
        let interp = file
            .section_by_name(".interp")
            .and_then(|s| s.data().ok())
            .map(|d| d.split(|&b| b == 0).next().unwrap_or(d).to_vec())
            .filter(|p| !p.is_empty());
        let mut symbols = collect_symbols(file.symbols());
        let has_symbol_table = !symbols.is_empty();
        if symbols.is_empty() {
            symbols = collect_symbols(file.dynamic_symbols());
        }
        symbols.extend(plt_symbols(&file));
        finish_symbols(&mut symbols, high);
        let text = text_range(&file);
        let span = high.saturating_sub(link_base);
        let links = DebugLinks {
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink: file.gnu_debuglink().ok().flatten().map(|(name, crc)| (name.to_vec(), crc)),
        };
        let image = Image {
            fixed,
            link_base,
            span,
            segments,
            interp,
            text,
            symbols,
            sorted_table: None,
            unwind_functions: std::sync::OnceLock::new(),
            file: None,
            label: Arc::from("image"),
            debug_file: None,
            build_id: links.build_id.clone(),
            has_symbol_table,
            dwarf_file: None,
            source_lines: std::sync::OnceLock::new(),
        };
        Ok((image, links))
    }

    /// The link-time address of the file offset `offset`: through the `PT_LOAD` segment whose
    /// file bytes hold it, else the last segment starting before it (its zero-filled tail),
    /// else as if the file were laid out at `link_base`.
    pub(crate) fn address_of_offset(&self, offset: u64) -> u64 {
        let after = self.segments.partition_point(|s| s.offset <= offset);
        let holding = self.segments[..after]
            .iter()
            .rev()
            .find(|s| offset - s.offset < s.file_size.max(1))
            .or_else(|| self.segments[..after].last());
        match holding {
            Some(s) => s.address.wrapping_add(offset - s.offset),
            None => self.link_base.wrapping_add(offset),
        }
    }

    /// The file offset of the link-time address `address` (the inverse of
    /// [`Image::address_of_offset`]): through the `PT_LOAD` segment holding the address.
    pub(crate) fn offset_of_address(&self, address: u64) -> u64 {
        let holding = self
            .segments
            .iter()
            .find(|s| address >= s.address && address - s.address < s.memory_size.max(s.file_size));
        match holding {
            Some(s) => s.offset + (address - s.address),
            None => address.wrapping_sub(self.link_base),
        }
    }

    /// Bytes of the file the segments reach (the highest segment end, in file offsets): how far
    /// past a MAP_IN start a mapping of the image reaches.
    pub(crate) fn file_span(&self) -> u64 {
        let end = self.segments.iter().map(|s| s.offset.saturating_add(s.memory_size)).max();
        end.unwrap_or(0).max(self.span)
    }

    /// Replaces dynamic symbols with a debug file's full symbol table.
    fn use_debug_symbols(&mut self, mut symbols: Vec<Symbol>, file: PathBuf) {
        // The PLT stubs are the image's own (a debug file has no code to find them in).
        symbols.extend(self.symbols.iter().filter(|s| s.name.ends_with(PLT_SUFFIX)).cloned());
        finish_symbols(&mut symbols, self.link_base.saturating_add(self.span));
        self.symbols = symbols;
        self.has_symbol_table = true;
        self.debug_file = Some(file);
    }

    /// The source frames at the link-time address `addr` (innermost first), from the DWARF of
    /// the image's debug file or of the image itself; empty without line information.
    pub(crate) fn source_at(&self, addr: u64) -> Vec<SourceFrame> {
        let lines = self
            .source_lines
            .get_or_init(|| self.dwarf_file.as_deref().and_then(SourceLines::load));
        lines.as_ref().map(|lines| lines.frames_at(addr)).unwrap_or_default()
    }

    /// The function symbol containing the link-time address `addr`; for code no symbol covers,
    /// the `.eh_frame` function around it, named `image+0xOFFSET` (its start's offset from the
    /// image's first byte, so PIEs and shared objects name it by its link-time address).
    pub(crate) fn symbol_at(&self, addr: u64) -> Option<Symbol> {
        if let Some(table) = &self.sorted_table {
            return sorted_symbol_at(table, addr);
        }
        let after = self.symbols.partition_point(|s| s.start <= addr);
        if let Some(symbol) = self.symbols[..after].last().filter(|s| addr < s.end) {
            return Some(symbol.clone());
        }
        let functions = self
            .unwind_functions
            .get_or_init(|| self.file.as_deref().map(read_unwind_functions).unwrap_or_default());
        let after = functions.partition_point(|&(start, _)| start <= addr);
        let &(start, end) = functions[..after].last().filter(|f| addr < f.1)?;
        let offset = start.wrapping_sub(self.link_base);
        Some(Symbol { start, end, name: Name::new(&format!("{}+{offset:#x}", self.label)) })
    }
}

/// The symbol table of the debug file at `path`, if it is the debug file of the image `links`
/// describe (same build ID, or the debuglink's CRC).
fn debug_file_symbols(path: &Path, check: Check, links: &DebugLinks) -> Option<Vec<Symbol>> {
    let (file, len) = super::image_file::open(path).ok()?;
    let symbols = if len <= READ_WHOLE {
        // Read at once: reading the symbol names one by one from the file is thousands of small
        // reads (5 ms for libc's debug file, where one read takes under 1 ms).
        let data = super::image_file::read_all(file, len).ok()?;
        if let Check::Crc(crc) = check {
            if debuglink_crc(&data) != crc {
                return None;
            }
        }
        matching_symbols(&*data, check, links)?
    } else {
        // A debuglink's CRC covers the whole file: too large a file is not checked, not used.
        matching_symbols(&object::ReadCache::new(file), check, links)
            .filter(|_| check == Check::BuildId)?
    };
    Some(symbols).filter(|symbols| !symbols.is_empty())
}

/// Debug files up to this size are read whole.
const READ_WHOLE: u64 = 512 << 20;

/// Images up to this size are read whole.
const READ_WHOLE_IMAGE: u64 = 16 << 20;

/// The symbol table of the ELF data `data`, if it has the build ID of `links` (for a
/// [`Check::BuildId`]; a CRC was checked by the caller).
fn matching_symbols<'data, R: object::ReadRef<'data>>(
    data: R,
    check: Check,
    links: &DebugLinks,
) -> Option<Vec<Symbol>> {
    let object = object::File::parse(data).ok()?;
    if check == Check::BuildId && object.build_id().ok().flatten() != links.build_id.as_deref() {
        return None;
    }
    Some(collect_symbols(object.symbols()))
}

/// [`unwind_functions`] of the ELF file at `path` (a regular file when the image was loaded;
/// checked again, and opened non-blocking, since it may have been replaced since).
fn read_unwind_functions(path: &Path) -> Vec<(u64, u64)> {
    let Ok((file, _)) = super::image_file::open(path) else { return Vec::new() };
    let cache = object::ReadCache::new(file);
    object::File::parse(&cache).map(|object| unwind_functions(&object)).unwrap_or_default()
}

/// The functions `.eh_frame` describes (one frame description entry each), sorted by start,
/// overlaps dropped. A malformed section gives the entries before the damage.
fn unwind_functions<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Vec<(u64, u64)> {
    use gimli::UnwindSection;
    let Some(section) = file.section_by_name(".eh_frame") else { return Vec::new() };
    let Ok(data) = section.data() else { return Vec::new() };
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut eh_frame = gimli::EhFrame::new(data, endian);
    eh_frame.set_address_size(if file.is_64() { 8 } else { 4 });
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut functions = Vec::new();
    let mut entries = eh_frame.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        let gimli::CieOrFde::Fde(partial) = entry else { continue };
        let Ok(fde) =
            partial.parse(|section, bases, offset| section.cie_from_offset(bases, offset))
        else {
            continue;
        };
        let (start, len) = (fde.initial_address(), fde.len());
        if start != 0 && len != 0 {
            functions.push((start, start.saturating_add(len)));
        }
    }
    functions.sort_unstable();
    let mut end = 0;
    functions.retain(|&(start, stop)| {
        let keep = start >= end;
        if keep {
            end = stop;
        }
        keep
    });
    functions
}

/// The address and name of a line of a sorted table.
fn sorted_line(line: &str) -> Option<(u64, &str)> {
    let (address, name) = line.split_at_checked(16)?;
    Some((u64::from_str_radix(address, 16).ok()?, name.strip_prefix(' ')?))
}

/// The symbol of a sorted table (with its header) containing `addr`: a binary search over the
/// lines, by bytes, parsing only the lines it visits.
fn sorted_symbol_at(table: &Arc<String>, addr: u64) -> Option<Symbol> {
    let body_start = SORTED_KALLSYMS_HEADER.len();
    let text = table.as_str();
    let line_at = |pos: usize| -> usize {
        // The start of the line holding byte `pos`.
        text[body_start..pos].rfind('\n').map_or(body_start, |i| body_start + i + 1)
    };
    let parse = |start: usize| -> Option<(u64, usize, usize)> {
        let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let (address, name) = sorted_line(&text[start..end])?;
        let name_at = end - name.len();
        Some((address, name_at, end))
    };
    // Invariant: the line starting at `lo` has an address <= addr; `hi` bounds the search.
    let (mut lo, mut hi) = (body_start, text.len());
    if parse(lo)?.0 > addr {
        return None;
    }
    while lo < hi {
        let mid = line_at(lo + (hi - lo) / 2);
        if mid <= lo {
            // The middle falls in the line at `lo`: try the line after it.
            let next = parse(lo)?.2 + 1;
            if next >= hi || parse(next).is_none_or(|(a, ..)| a > addr) {
                break;
            }
            lo = next;
            continue;
        }
        match parse(mid) {
            Some((a, ..)) if a <= addr => lo = mid,
            _ => hi = mid,
        }
    }
    let (start, name_at, end) = parse(lo)?;
    let next = (end + 1 < text.len()).then(|| parse(end + 1)).flatten();
    let stop = next.map_or(start + 4096, |(a, ..)| a);
    let (at, len) = (u32::try_from(name_at).ok()?, u32::try_from(end - name_at).ok()?);
    (addr < stop).then(|| Symbol {
        start,
        end: stop,
        name: Name::In { table: table.clone(), at, len },
    })
}

/// The link-time range of an ELF file's code: its allocated `SHF_EXECINSTR` sections, or, without
/// section headers, its `PF_X` `PT_LOAD` segments.
fn text_range<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Option<(u64, u64)> {
    let widen = |range: Option<(u64, u64)>, start: u64, size: u64| match range {
        _ if size == 0 => range,
        None => Some((start, start.saturating_add(size))),
        Some((lo, hi)) => Some((lo.min(start), hi.max(start.saturating_add(size)))),
    };
    let code = u64::from(object::elf::SHF_EXECINSTR | object::elf::SHF_ALLOC);
    let sections = file.sections().fold(None, |range, section| match section.flags() {
        SectionFlags::Elf { sh_flags } if sh_flags & code == code => {
            widen(range, section.address(), section.size())
        }
        _ => range,
    });
    sections.or_else(|| {
        file.segments().fold(None, |range, segment| match segment.flags() {
            SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0 => {
                widen(range, segment.address(), segment.size())
            }
            _ => range,
        })
    })
}

fn collect_symbols<'data, 'file, I, S>(iter: I) -> Vec<Symbol>
where
    I: Iterator<Item = S>,
    S: ObjectSymbol<'data>,
{
    iter.filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?;
            Some(Symbol { start: s.address(), end: s.address() + s.size(), name: Name::new(name) })
        })
        .collect()
}

/// The x86-64 PLT stubs of an ELF file, named `func@plt` after the function whose GOT slot
/// they jump through (no symbol covers them; they would be taken for the function before).
///
/// Every linker lays its stubs out in 16-byte entries (`sh_entsize` says otherwise, as GNU
/// ld's 8-byte `.plt.got` entries) that jump through a GOT slot with `jmp *slot(%rip)`
/// (`ff 25 rel32`), possibly after an `endbr64` or a `bnd` prefix; the slot's `JUMP_SLOT` (or,
/// for `.plt.got`, `GLOB_DAT`) dynamic relocation names the function. The lazy-binding header
/// jumps through a slot no relocation names, and stays unnamed.
fn plt_symbols<'data, R: object::ReadRef<'data>>(file: &object::File<'data, R>) -> Vec<Symbol> {
    use object::{ObjectSymbolTable, RelocationFlags, RelocationTarget};
    if file.architecture() != object::Architecture::X86_64 {
        return Vec::new();
    }
    let (Some(relocations), Some(dynamic)) =
        (file.dynamic_relocations(), file.dynamic_symbol_table())
    else {
        return Vec::new();
    };
    let slots: std::collections::HashMap<u64, &str> = relocations
        .filter_map(|(slot, relocation)| {
            let RelocationFlags::Elf { r_type } = relocation.flags() else { return None };
            if r_type != object::elf::R_X86_64_JUMP_SLOT && r_type != object::elf::R_X86_64_GLOB_DAT
            {
                return None;
            }
            let RelocationTarget::Symbol(index) = relocation.target() else { return None };
            let name = dynamic.symbol_by_index(index).ok()?.name().ok()?;
            (!name.is_empty()).then_some((slot, name))
        })
        .collect();
    let mut stubs = Vec::new();
    for section in file.sections() {
        let name = section.name().unwrap_or_default();
        if !matches!(name, ".plt" | ".plt.sec" | ".plt.got") {
            continue;
        }
        let Ok(code) = section.data() else { continue };
        let entry = if name == ".plt.got" && section.align() == 8 { 8 } else { 16 };
        for at in 0..code.len().saturating_sub(5) {
            if code[at..at + 2] != [0xff, 0x25] {
                continue;
            }
            let rel = i32::from_le_bytes([code[at + 2], code[at + 3], code[at + 4], code[at + 5]]);
            let next = section.address() + at as u64 + 6;
            let Some(target) = slots.get(&next.wrapping_add(rel as i64 as u64)) else { continue };
            let start = section.address() + (at as u64 / entry) * entry;
            let name = Name::new(&format!("{target}{PLT_SUFFIX}"));
            stubs.push(Symbol { start, end: start + entry, name });
        }
    }
    stubs
}

/// Sorts the symbols, keeps one per start address (the sized, global-looking one), and gives
/// zero-sized symbols the room up to the next symbol (or the end of the image).
fn finish_symbols(symbols: &mut Vec<Symbol>, image_end: u64) {
    // At one address, prefer a symbol with a size, then a name without a leading underscore,
    // then the shorter name (aliases like `__libc_malloc` / `malloc`).
    symbols.sort_unstable_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then((a.end == a.start).cmp(&(b.end == b.start)))
            .then(a.name.starts_with('_').cmp(&b.name.starts_with('_')))
            .then(a.name.len().cmp(&b.name.len()))
            .then((*a.name).cmp(&*b.name))
    });
    symbols.dedup_by(|later, first| later.start == first.start);
    for i in 0..symbols.len() {
        if symbols[i].end <= symbols[i].start {
            let next = symbols.get(i + 1).map_or(image_end, |s| s.start);
            symbols[i].end = next.max(symbols[i].start + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kallsyms_table_gives_the_kernel_text_symbols_at_their_addresses() {
        let table = "\
ffffffff81000000 T _stext
ffffffff81000100 t helper
ffffffff81000100 T helper_alias
ffffffff81002000 D some_data
ffffffff81003000 W weak_fn
ffffffffc0001000 t mod_fn\t[ext4]
";
        let image = Image::from_kallsyms(table.to_owned()).unwrap();
        assert!(image.fixed);
        assert_eq!(image.link_base, 0xffff_ffff_8100_0000);
        assert_eq!(&*image.symbol_at(0xffff_ffff_8100_0050).unwrap().name, "_stext");
        // One name per address (the first); a function reaches to the next text symbol, over
        // data symbols.
        assert_eq!(&*image.symbol_at(0xffff_ffff_8100_2fff).unwrap().name, "helper");
        assert_eq!(&*image.symbol_at(0xffff_ffff_8100_3000).unwrap().name, "weak_fn");
        assert_eq!(&*image.symbol_at(0xffff_ffff_c000_1010).unwrap().name, "mod_fn");
    }

    #[test]
    fn a_kallsyms_table_with_hidden_addresses_is_no_image() {
        assert!(
            Image::from_kallsyms("0000000000000000 T _stext\n0000000000000000 t f\n".to_owned())
                .is_none()
        );
    }

    #[test]
    fn a_sorted_table_is_searched_in_place_with_the_same_answers() {
        let table = format!(
            "{SORTED_KALLSYMS_HEADER}ffffffff81000000 _stext\nffffffff81000100 helper\n\
             ffffffff81003000 weak_fn\nffffffffc0001000 mod_fn\n"
        );
        let image = Image::from_kallsyms(table).unwrap();
        assert_eq!(image.link_base, 0xffff_ffff_8100_0000);
        let name = |addr| image.symbol_at(addr).map(|s| (*s.name).to_owned());
        assert_eq!(name(0xffff_ffff_80ff_ffff), None);
        assert_eq!(name(0xffff_ffff_8100_0000).as_deref(), Some("_stext"));
        assert_eq!(name(0xffff_ffff_8100_00ff).as_deref(), Some("_stext"));
        assert_eq!(name(0xffff_ffff_8100_0100).as_deref(), Some("helper"));
        assert_eq!(name(0xffff_ffff_8100_2fff).as_deref(), Some("helper"));
        assert_eq!(name(0xffff_ffff_8100_3000).as_deref(), Some("weak_fn"));
        assert_eq!(name(0xffff_ffff_c000_1fff).as_deref(), Some("mod_fn"));
        assert_eq!(name(0xffff_ffff_c000_2000), None, "4 KiB past the last symbol");
        let end = image.symbol_at(0xffff_ffff_8100_0150).unwrap().end;
        assert_eq!(end, 0xffff_ffff_8100_3000);
    }

    #[test]
    fn a_sorted_table_of_many_symbols_finds_each_one() {
        let mut table = SORTED_KALLSYMS_HEADER.to_owned();
        for i in 0..1000u64 {
            table.push_str(&format!("{:016x} f{i}\n", 0xffff_ffff_8100_0000 + i * 0x40));
        }
        let image = Image::from_kallsyms(table).unwrap();
        for i in 0..1000u64 {
            let symbol = image.symbol_at(0xffff_ffff_8100_0000 + i * 0x40 + 0x3f).unwrap();
            assert_eq!(&*symbol.name, format!("f{i}"));
        }
    }

    #[test]
    fn zero_sized_symbols_reach_to_the_next_symbol() {
        let mut symbols = vec![
            Symbol { start: 0x20, end: 0x20, name: Name::new("b") },
            Symbol { start: 0x10, end: 0x10, name: Name::new("a") },
            Symbol { start: 0x10, end: 0x18, name: Name::new("_a_alias") },
        ];
        finish_symbols(&mut symbols, 0x40);
        let image = Image::absolute(0, 0x40, symbols, None);
        assert_eq!(&*image.symbol_at(0x10).unwrap().name, "_a_alias");
        assert!(image.symbol_at(0x18).is_none());
        assert_eq!(&*image.symbol_at(0x3f).unwrap().name, "b");
        assert!(image.symbol_at(0x40).is_none());
        assert!(image.symbol_at(0x0f).is_none());
    }

    #[test]
    fn the_text_range_spans_the_executable_sections() {
        let p = pmcprof_fixtures::Program::build(true);
        let image = Image::load(&p.path).unwrap();
        let data = std::fs::read(&p.path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let address = |name: &str| file.section_by_name(name).map(|s| (s.address(), s.size()));
        let (init, _) = address(".init").unwrap();
        let (fini, fini_size) = address(".fini").unwrap();
        assert_eq!(image.text, Some((init, fini + fini_size)));
        let functions = Image::from_symbols(vec![(0x40_0040, 0x40_0080, "b".into())]).unwrap();
        assert_eq!(functions.text, Some((0x40_0040, 0x40_0080)));
    }

    /// Runs a binutils command on the test program's files.
    fn binutils(tool: &str, args: &[&std::ffi::OsStr]) {
        let status = std::process::Command::new(tool).args(args).status().expect(tool);
        assert!(status.success(), "{tool} {args:?}");
    }

    /// The test program with its debug information split off into `prog.debug` beside it and
    /// the executable stripped (as distributions ship binaries), with or without a debuglink.
    fn split_program(debuglink: bool) -> (pmcprof_fixtures::Program, PathBuf) {
        let p = pmcprof_fixtures::Program::build(true);
        let debug = p.path.with_extension("debug");
        binutils("objcopy", &["--only-keep-debug".as_ref(), p.path.as_os_str(), debug.as_os_str()]);
        binutils("strip", &["--strip-all".as_ref(), p.path.as_os_str()]);
        if debuglink {
            let link = std::ffi::OsString::from(format!("--add-gnu-debuglink={}", debug.display()));
            binutils("objcopy", &[&link, p.path.as_os_str()]);
        }
        (p, debug)
    }

    /// The build ID of the ELF file at `path`.
    fn build_id_of(path: &Path) -> Vec<u8> {
        let data = std::fs::read(path).unwrap();
        object::File::parse(&*data).unwrap().build_id().unwrap().expect("a build ID").to_vec()
    }

    /// `root/.build-id/ab/cdef….debug` for the build ID `id`, its directory created.
    fn build_id_path(root: &Path, id: &[u8]) -> PathBuf {
        let hex = crate::symbols::debuginfo::hex(id);
        let path = root.join(".build-id").join(&hex[..2]).join(format!("{}.debug", &hex[2..]));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path
    }

    /// A search that finds nothing unless told: no global directory, no debuginfod cache.
    fn nowhere(dir: &Path) -> DebugSearch {
        DebugSearch { debug_dir: Some(dir.join("none")), debuginfod_cache: Some(dir.join("none")) }
    }

    #[test]
    fn a_stripped_image_takes_its_symbols_from_the_debug_file_its_build_id_names() {
        let (p, debug) = split_program(false);
        let stripped = Image::load_with(&p.path, None, &nowhere(p._dir.path())).unwrap();
        let hot = p.at("hot", 4);
        assert_ne!(stripped.symbol_at(hot).map(|s| s.name.to_string()).as_deref(), Some("hot"));
        let root = p._dir.path().join("debug");
        let by_id = build_id_path(&root, &build_id_of(&p.path));
        std::fs::rename(&debug, &by_id).unwrap();
        let search = DebugSearch { debug_dir: Some(root), ..nowhere(p._dir.path()) };
        let image = Image::load_with(&p.path, None, &search).unwrap();
        assert_eq!(image.debug_file.as_deref(), Some(by_id.as_path()));
        for name in ["hot", "warm", "cold", "main"] {
            let symbol = image.symbol_at(p.at(name, 1)).unwrap();
            assert_eq!((&*symbol.name, symbol.start), (name, p.functions[name].0));
        }
    }

    #[test]
    fn a_debug_file_of_another_build_is_not_used() {
        let (p, _) = split_program(false);
        // Another program's debug file, put where this program's build ID points.
        let other = p._dir.path().join("other");
        let source = p._dir.path().join("other.c");
        std::fs::write(&source, "int main(void) { return 7; }\n").unwrap();
        binutils("gcc", &["-o".as_ref(), other.as_os_str(), source.as_os_str()]);
        let other_debug = other.with_extension("debug");
        binutils(
            "objcopy",
            &["--only-keep-debug".as_ref(), other.as_os_str(), other_debug.as_os_str()],
        );
        let id = build_id_of(&p.path);
        assert_ne!(id, build_id_of(&other_debug), "two different programs, two build IDs");
        let root = p._dir.path().join("debug");
        let by_id = build_id_path(&root, &id);
        std::fs::copy(&other_debug, &by_id).unwrap();
        let search = DebugSearch { debug_dir: Some(root), ..nowhere(p._dir.path()) };
        let image = Image::load_with(&p.path, None, &search).unwrap();
        assert_eq!(image.debug_file, None);
        assert_ne!(
            image.symbol_at(p.at("main", 0)).map(|s| s.name.to_string()).as_deref(),
            Some("main")
        );
    }

    #[test]
    fn a_debuglink_beside_the_image_is_used_when_its_crc_matches() {
        let (p, debug) = split_program(true);
        let image = Image::load_with(&p.path, None, &nowhere(p._dir.path())).unwrap();
        assert_eq!(image.debug_file.as_deref(), Some(debug.as_path()));
        assert_eq!(&*image.symbol_at(p.at("warm", 2)).unwrap().name, "warm");
        // The same name with other contents fails the CRC check: not used.
        let mut data = std::fs::read(&debug).unwrap();
        data.push(0);
        std::fs::write(&debug, data).unwrap();
        let image = Image::load_with(&p.path, None, &nowhere(p._dir.path())).unwrap();
        assert_eq!(image.debug_file, None);
    }

    #[test]
    fn stripped_code_is_grouped_into_its_unwind_tables_functions() {
        let (p, _) = split_program(false);
        let image = Image::load_with(&p.path, None, &nowhere(p._dir.path())).unwrap();
        assert!(image.debug_file.is_none());
        for name in ["hot", "warm", "cold"] {
            let (start, size) = p.functions[name];
            let expected = format!("prog+{:#x}", start - image.link_base);
            for offset in [0, size / 2, size - 1] {
                let symbol = image.symbol_at(start + offset).unwrap();
                assert_eq!(
                    (&*symbol.name, symbol.start, symbol.end),
                    (&*expected, start, start + size)
                );
            }
        }
    }

    /// A program calling two libc functions through the PLT.
    const CALLS_LIBC: &str = "#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) { return (int)strlen(argv[0]) + atoi(argv[argc - 1]); }
";

    /// The targets of the `call rel32` instructions of the function `name` of the ELF file.
    fn call_targets(data: &[u8], name: &str) -> Vec<u64> {
        let file = object::File::parse(data).unwrap();
        let symbol = file.symbols().find(|s| s.name() == Ok(name)).unwrap();
        let text = file.section_by_name(".text").unwrap();
        let code = text.data_range(symbol.address(), symbol.size()).unwrap().unwrap();
        (0..code.len().saturating_sub(4))
            .filter(|&i| code[i] == 0xe8)
            .map(|i| {
                let rel = i32::from_le_bytes(code[i + 1..i + 5].try_into().unwrap());
                (symbol.address() + i as u64 + 5).wrapping_add(rel as i64 as u64)
            })
            .collect()
    }

    /// binutils' `objdump -d` names of the PLT stubs it recognises: (address, `func@plt`).
    fn objdump_plt_names(path: &Path) -> Vec<(u64, String)> {
        let out = std::process::Command::new("objdump").arg("-d").arg(path).output().unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|line| {
                let (address, rest) = line.split_once(" <")?;
                let name = rest.strip_suffix(">:")?.strip_suffix("@plt")?;
                Some((u64::from_str_radix(address, 16).ok()?, format!("{name}@plt")))
            })
            .collect()
    }

    #[test]
    fn plt_stubs_are_named_after_the_functions_they_jump_to() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("calls.c");
        std::fs::write(&source, CALLS_LIBC).unwrap();
        let layouts: [&[&str]; 4] =
            [&["-pie"], &["-no-pie"], &["-Wl,-z,now"], &["-fcf-protection=full", "-Wl,-z,ibtplt"]];
        for linker in ["bfd", "lld", "mold"] {
            let command = if linker == "lld" { "ld.lld" } else { linker };
            if linker != "bfd"
                && std::process::Command::new(command).arg("--version").output().is_err()
            {
                eprintln!("skipped: {command} is not installed (apt-get install {linker})");
                continue;
            }
            for flags in layouts {
                let case = format!("{linker} {flags:?}");
                let path = dir.path().join(format!("calls-{linker}-{}", flags.join("")));
                let status = std::process::Command::new("gcc")
                    .arg(format!("-fuse-ld={linker}"))
                    .args(flags)
                    .arg("-o")
                    .arg(&path)
                    .arg(&source)
                    .status()
                    .unwrap();
                assert!(status.success(), "{case}");
                let image = Image::load(&path).unwrap();
                let name = |address: u64| image.symbol_at(address).map(|s| s.name.to_string());
                // Where binutils knows the layout, the same names at the same addresses.
                for (address, plt_name) in objdump_plt_names(&path) {
                    assert_eq!(name(address + 2).as_deref(), Some(&*plt_name), "{case}");
                }
                // Every linker's: main's calls go to strlen's and atoi's stubs.
                let data = std::fs::read(&path).unwrap();
                let mut called: Vec<String> =
                    call_targets(&data, "main").into_iter().filter_map(name).collect();
                called.sort();
                assert_eq!(called, ["atoi@plt", "strlen@plt"], "{case}");
            }
        }
    }

    #[test]
    fn non_elf_data_is_rejected() {
        assert!(Image::parse(&b"#!/bin/sh\necho hi\n"[..]).is_err());
    }
}
