//! Unwinding sampled user stacks with the images' CFI, as `perf record --call-graph dwarf` and
//! samply do: a sample carries the user registers (IP, SP, BP) and a copy of the top of the user
//! stack; the unwinder (framehop) follows the `.eh_frame` rules of the image mapped at each
//! address, so code without frame pointers gets its whole callchain.
//!
//! The host keeps, per process, the executable mappings it was told of (perf's MMAP2 records in
//! time order, and `/proc/PID/maps` for a process first seen already running) and, per image
//! file, its parsed unwind sections, read once and shared by every process that maps it.
//! Nothing in a sample is trusted: the unwinder only reads the copied bytes, stops after
//! [`MAX_FRAMES`] frames, and fails (the caller keeps perf's frame-pointer chain) rather than
//! guess.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use hwpmc::Pid;
use object::{Object, ObjectSection, ObjectSegment, SegmentFlags};

/// The user state of a sample, for unwinding with CFI: the registers the unwinder starts from
/// and the bytes of the stack from `sp` up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStack {
    /// The sampled instruction pointer.
    pub ip: u64,
    /// The stack pointer: the address of `bytes[0]`.
    pub sp: u64,
    /// The frame pointer register (`%rbp`), for code the CFI does not cover.
    pub bp: u64,
    /// The copy of the stack from `sp` up.
    pub bytes: Vec<u8>,
    /// Where the user frames start in the sample's program counters (after the kernel frames of
    /// a kernel-mode sample; 0 otherwise).
    pub user_at: usize,
}

/// An executable mapping of a file: its start address, length and the file offset it maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// The first address mapped.
    pub addr: u64,
    /// Bytes mapped.
    pub len: u64,
    /// The file offset mapped at `addr`.
    pub pgoff: u64,
}

impl Mapping {
    /// The addresses mapped.
    pub fn range(&self) -> Range<u64> {
        self.addr..self.addr.saturating_add(self.len)
    }
}

/// The most frames one unwind yields (`kern.hwpmc.callchaindepth`'s default): a hostile stack
/// copy or bogus CFI cannot make it loop.
pub const MAX_FRAMES: usize = 128;
/// Image files whose unwind sections are kept, and their bytes; past either the cache starts
/// again.
const MAX_IMAGES: usize = 1024;
const MAX_CACHED_BYTES: usize = 256 << 20;
/// The largest unwind section read (the `.eh_frame` of a 1 GB program is a few tens of MB);
/// an image with a larger one is treated as having no CFI.
const MAX_SECTION_BYTES: u64 = 64 << 20;
/// Processes whose mappings are kept; past it they are read again from `/proc` when sampled.
const MAX_PROCESSES: usize = 4096;
/// The name perf and `/proc/PID/maps` give the vDSO's mapping.
pub(crate) const VDSO_NAME: &[u8] = b"[vdso]";
/// `PF_X`: an ELF segment holds code.
const PF_X: u32 = 1;

/// Section bytes the unwinder reads (shared by every process mapping the image).
type Bytes = Arc<[u8]>;

/// One ELF image's unwind sections and its code segments.
struct Image {
    eh_frame: Option<(Range<u64>, Bytes)>,
    eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    debug_frame: Option<Bytes>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    /// Executable PT_LOAD segments: (file offset, size in the file, link-time address).
    code_segments: Vec<(u64, u64, u64)>,
}

impl Image {
    /// The bytes of its sections kept in memory.
    fn bytes(&self) -> usize {
        let len = |d: Option<&Bytes>| d.map_or(0, |d| d.len());
        len(self.eh_frame.as_ref().map(|(_, d)| d))
            + len(self.eh_frame_hdr.as_ref().map(|(_, d)| d))
            + len(self.debug_frame.as_ref())
    }
}

impl Image {
    /// Reads the unwind sections of the ELF file at `path` (only those, not the whole file);
    /// `None` if it is no ELF file or has no CFI.
    fn read(path: &std::path::Path) -> Option<Image> {
        let file = File::open(path).ok()?;
        let cache = object::ReadCache::new(file);
        Image::parse(&object::File::parse(&cache).ok()?)
    }

    /// The kernel's vDSO, the same image in every 64-bit process: read from this process's
    /// memory once.
    fn vdso() -> Option<Arc<Image>> {
        static VDSO: std::sync::OnceLock<Option<Arc<Image>>> = std::sync::OnceLock::new();
        VDSO.get_or_init(|| {
            let (mapping, _) =
                executable_mappings_of("self").into_iter().find(|(_, p)| p == VDSO_NAME)?;
            let mut bytes = vec![0; usize::try_from(mapping.len).ok()?];
            let mem = File::open("/proc/self/mem").ok()?;
            std::os::unix::fs::FileExt::read_exact_at(&mem, &mut bytes, mapping.addr).ok()?;
            Image::parse(&object::File::parse(&bytes[..]).ok()?).map(Arc::new)
        })
        .clone()
    }

    fn parse<'data, R: object::ReadRef<'data>>(elf: &object::File<'data, R>) -> Option<Image> {
        let section = |name: &str| {
            let s = elf.section_by_name(name).filter(|s| s.size() <= MAX_SECTION_BYTES)?;
            let data: Bytes = s.data().ok()?.into();
            Some((s.address()..s.address() + s.size(), data))
        };
        let range = |name: &str| {
            let s = elf.section_by_name(name)?;
            Some(s.address()..s.address() + s.size())
        };
        let code_segments = elf
            .segments()
            .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & PF_X != 0))
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        let eh_frame = section(".eh_frame");
        // .debug_frame only where there is no .eh_frame (framehop would not read it).
        let debug_frame =
            if eh_frame.is_none() { section(".debug_frame").map(|(_, d)| d) } else { None };
        let image = Image {
            eh_frame,
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame,
            text: range(".text"),
            got: range(".got"),
            code_segments,
        };
        (image.eh_frame.is_some() || image.debug_frame.is_some()).then_some(image)
    }

    /// How far this image is moved when `mapping` maps it: the address of its link-time
    /// address 0. `None` if the mapping covers no code segment.
    fn bias(&self, mapping: &Mapping) -> Option<u64> {
        const PAGE_MASK: u64 = !0xFFF;
        let (offset, _, vaddr) = *self.code_segments.iter().find(|&&(offset, size, _)| {
            (offset & PAGE_MASK..offset.saturating_add(size)).contains(&mapping.pgoff)
        })?;
        // The file byte at `o` is at `addr + o - pgoff`; the segment puts it at `vaddr + o - offset`.
        Some(mapping.addr.wrapping_add(offset).wrapping_sub(mapping.pgoff).wrapping_sub(vaddr))
    }

    /// The unwinder's module for this image mapped by `mapping`.
    fn module(&self, name: &[u8], mapping: &Mapping) -> Option<Module<Bytes>> {
        let bias = self.bias(mapping)?;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|(r, _)| r.clone()),
            eh_frame: self.eh_frame.as_ref().map(|(_, d)| d.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        };
        let end = mapping.addr.checked_add(mapping.len)?;
        let name = String::from_utf8_lossy(name).into_owned();
        Some(Module::new(name, mapping.addr..end, bias, info))
    }
}

/// Which file an image is: its path and identity (a file replaced at the same path is another
/// image).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ImageKey {
    path: Vec<u8>,
    dev: u64,
    ino: u64,
    mtime: i64,
}

/// One process's mapped images.
#[derive(Clone, Default)]
struct Process {
    unwinder: UnwinderX86_64<Bytes>,
    /// The code ranges whose images have CFI.
    covered: Vec<Range<u64>>,
    /// Whether its mappings are all known: seen from its exec on, or read from `/proc`.
    complete: bool,
}

/// The unwinding state of the Linux host: processes' mappings and the images' unwind sections.
/// Public for benchmarks and tools that unwind stack copies the same way.
#[derive(Default)]
pub struct Unwinding {
    images: HashMap<ImageKey, Option<Arc<Image>>>,
    /// The bytes `images` holds.
    image_bytes: usize,
    processes: HashMap<Pid, Process>,
    cache: CacheX86_64,
}

impl Unwinding {
    /// The parsed unwind sections of the image at `path`, read on first use.
    fn image(&mut self, path: &[u8]) -> Option<Arc<Image>> {
        if path == VDSO_NAME {
            return Image::vdso();
        }
        let path_buf = std::path::Path::new(<std::ffi::OsStr as OsStrExt>::from_bytes(path));
        let meta = std::fs::metadata(path_buf).ok().filter(|m| m.is_file())?;
        let key =
            ImageKey { path: path.to_vec(), dev: meta.dev(), ino: meta.ino(), mtime: meta.mtime() };
        if let Some(image) = self.images.get(&key) {
            return image.clone();
        }
        let image = Image::read(path_buf).map(Arc::new);
        let bytes = image.as_ref().map_or(0, |i| i.bytes());
        if self.images.len() >= MAX_IMAGES || self.image_bytes + bytes > MAX_CACHED_BYTES {
            // Processes keep the images they map (their modules share the bytes).
            self.images.clear();
            self.image_bytes = 0;
        }
        self.image_bytes += bytes;
        self.images.insert(key, image.clone());
        image
    }

    fn process(&mut self, pid: Pid) -> &mut Process {
        if self.processes.len() >= MAX_PROCESSES && !self.processes.contains_key(&pid) {
            self.processes.clear();
        }
        self.processes.entry(pid).or_default()
    }

    /// Process `pid` mapped `path` executable at `mapping` (a file opened by that path here).
    pub fn map(&mut self, pid: Pid, mapping: Mapping, path: &[u8]) {
        self.map_file(pid, mapping, path, Some(path));
    }

    /// Process `pid` mapped the file it calls `name` executable at `mapping`; the host opens it
    /// by `open` (another path for a process in another mount namespace), or has no file for it.
    pub(crate) fn map_file(
        &mut self,
        pid: Pid,
        mapping: Mapping,
        name: &[u8],
        open: Option<&[u8]>,
    ) {
        let image = open.and_then(|open| self.image(open));
        let module = image.and_then(|image| image.module(name, &mapping));
        let process = self.process(pid);
        // A mapping over an older one replaces it.
        let range = mapping.range();
        let replaced: Vec<u64> = process
            .covered
            .iter()
            .filter(|r| r.start < range.end && range.start < r.end)
            .map(|r| r.start)
            .collect();
        for start in replaced {
            process.unwinder.remove_module(start);
        }
        process.covered.retain(|r| !(r.start < range.end && range.start < r.end));
        if let Some(module) = module {
            process.unwinder.add_module(module);
            process.covered.push(range);
        }
    }

    /// Process `pid` executed a program: its old mappings are gone, and every new one will be
    /// seen.
    pub fn exec(&mut self, pid: Pid) {
        *self.process(pid) = Process { complete: true, ..Process::default() };
    }

    /// Process `parent` forked `child`, which starts with its parent's mappings.
    pub fn fork(&mut self, parent: Pid, child: Pid) {
        let copy = self.processes.get(&parent).cloned().unwrap_or_default();
        *self.process(child) = copy;
    }

    /// Process `pid` ended.
    pub fn exit(&mut self, pid: Pid) {
        self.processes.remove(&pid);
    }

    /// The user callchain of a sample of `pid` with `stack`: the sampled PC, then the return
    /// addresses, at most `max` of them all. `None` when the PC is in no image with CFI or perf
    /// copied no stack (the caller keeps perf's frame-pointer chain then).
    pub fn unwind(&mut self, pid: Pid, stack: &UserStack, max: usize) -> Option<Vec<u64>> {
        if stack.bytes.is_empty() {
            return None;
        }
        if !self.processes.get(&pid).is_some_and(|p| p.complete) {
            self.read_maps(pid);
        }
        let process = self.processes.get(&pid)?;
        if !process.covered.iter().any(|r| r.contains(&stack.ip)) {
            return None;
        }
        Some(unwind_with(&process.unwinder, &mut self.cache, stack, max.min(MAX_FRAMES)))
    }

    /// Learns the mappings of a process first seen running from `/proc/PID/maps` (done by
    /// [`Unwinding::unwind`] for a process it knows nothing complete of).
    pub fn read_maps(&mut self, pid: Pid) {
        for (mapping, path) in executable_mappings(pid) {
            let located = super::mount_ns::locate(pid, &path, None, Some(mapping.range()));
            self.map_file(pid, mapping, &path, located.open.as_deref());
        }
        self.process(pid).complete = true;
    }
}

/// Unwinds `stack` with `unwinder`: the sampled PC, then up to `max - 1` return addresses (fewer
/// where the copy or the CFI ends).
fn unwind_with(
    unwinder: &UnwinderX86_64<Bytes>,
    cache: &mut CacheX86_64,
    stack: &UserStack,
    max: usize,
) -> Vec<u64> {
    let bytes = &stack.bytes[..];
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        let at = usize::try_from(addr.checked_sub(stack.sp).ok_or(())?).map_err(|_| ())?;
        let word = bytes.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
        Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
    };
    let regs = UnwindRegsX86_64::new(stack.ip, stack.sp, stack.bp);
    let mut frames = unwinder.iter_frames(stack.ip, regs, cache, &mut read_stack);
    let mut pcs = Vec::new();
    // Each step yields a frame or ends: at most `max` steps.
    while pcs.len() < max {
        match frames.next() {
            Ok(Some(frame)) => pcs.push(frame.address()),
            Ok(None) | Err(_) => break,
        }
    }
    pcs
}

/// The executable file mappings (and the vDSO) of process `pid` from `/proc/PID/maps`.
fn executable_mappings(pid: Pid) -> Vec<(Mapping, Vec<u8>)> {
    executable_mappings_of(&pid.to_string())
}

/// [`executable_mappings`] of `/proc/WHO/maps`.
fn executable_mappings_of(who: &str) -> Vec<(Mapping, Vec<u8>)> {
    let Ok(maps) = std::fs::read(format!("/proc/{who}/maps")) else { return Vec::new() };
    maps.split(|&b| b == b'\n').filter_map(parse_maps_line).collect()
}

/// One line of `/proc/PID/maps` (`start-end perms offset dev inode path`), if it maps a file
/// executable, or the vDSO.
fn parse_maps_line(line: &[u8]) -> Option<(Mapping, Vec<u8>)> {
    let mut fields = line.splitn(6, |&b| b == b' ');
    let (range, perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.nth(2)?.trim_ascii_start();
    let file = path.starts_with(b"/") && !path.ends_with(b" (deleted)");
    if perms.get(2) != Some(&b'x') || !(file || path == VDSO_NAME) {
        return None;
    }
    let hex = |b: &[u8]| u64::from_str_radix(std::str::from_utf8(b).ok()?, 16).ok();
    let mut ends = range.split(|&b| b == b'-');
    let (start, end) = (hex(ends.next()?)?, hex(ends.next()?)?);
    let mapping = Mapping { addr: start, len: end.checked_sub(start)?, pgoff: hex(offset)? };
    Some((mapping, path.to_vec()))
}

/// This thread's registers at a point inside this function and a copy of `len` bytes of its
/// stack from there up (read from `/proc/self/mem`), as perf copies a sampled stack.
#[inline(never)]
fn capture(len: usize) -> std::io::Result<UserStack> {
    use std::os::unix::fs::FileExt;
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: copies the instruction pointer, the stack pointer and %rbp into three registers;
    // reads and writes no memory.
    unsafe {
        core::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        )
    };
    let mut bytes = vec![0; len];
    let read = File::open("/proc/self/mem")?.read_at(&mut bytes, sp)?;
    bytes.truncate(read);
    Ok(UserStack { ip, sp, bp, bytes, user_at: 0 })
}

/// This thread's stack `depth` nested calls of [`nested_stack`] deep (at least 1), captured
/// as perf copies a sampled one with `len` bytes of stack: a stack of known shape, for the
/// unwinder's tests and benchmark.
#[inline(never)]
pub fn nested_stack(depth: usize, len: usize) -> std::io::Result<UserStack> {
    let stack = if depth <= 1 { capture(len) } else { nested_stack(depth - 1, len) };
    std::hint::black_box(stack)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Pid {
        std::process::id() as Pid
    }

    #[test]
    fn a_stack_of_this_process_unwinds_through_every_frame_at_depth_32() {
        let stack = nested_stack(32, 64 * 1024).unwrap();
        let mut unwinding = Unwinding::default();
        let pcs = unwinding.unwind(me(), &stack, MAX_FRAMES).expect("this test binary has CFI");
        assert_eq!(pcs[0], stack.ip);
        // nested_stack(1) returns from its call of capture, nested_stack(2..=32) from their
        // calls of nested_stack: one return address 31 times, both inside nested_stack.
        let start = nested_stack as *const () as u64;
        assert!(pcs.len() > 33, "{} frames: {pcs:x?}", pcs.len());
        let (innermost, nested) = (pcs[1], pcs[2]);
        assert!(pcs[2..=32].iter().all(|&pc| pc == nested), "{pcs:x?}");
        assert_ne!(innermost, nested);
        for pc in [innermost, nested] {
            assert!(
                (start..start + 0x1000).contains(&pc),
                "{pc:#x} not in nested_stack at {start:#x}"
            );
        }
        // Then this test's own frame and its callers, not nested_stack again.
        assert_ne!(pcs[33], nested);
    }

    #[test]
    fn a_sample_in_code_without_cfi_is_left_to_the_frame_pointer_chain() {
        let mut stack = nested_stack(2, 4096).unwrap();
        stack.ip = 0x10;
        assert_eq!(Unwinding::default().unwind(me(), &stack, MAX_FRAMES), None);
    }

    #[test]
    fn hostile_stack_copies_end_within_the_frame_limit() {
        let real = nested_stack(4, 8192).unwrap();
        let mut unwinding = Unwinding::default();
        let nested = unwinding.unwind(me(), &real, MAX_FRAMES).unwrap()[2];
        // A stack of one return address again and again, and one of frame pointers that point
        // at themselves above return addresses outside any image, and noise.
        let words: [Vec<u64>; 3] = [
            vec![nested; 1024],
            (0..1024u64).map(|i| if i % 2 == 0 { real.sp + i * 8 } else { 0x10 }).collect(),
            (0..1024u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect(),
        ];
        for words in words {
            let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let stack = UserStack { bytes, bp: real.sp, ..real.clone() };
            let pcs = unwinding.unwind(me(), &stack, MAX_FRAMES).unwrap();
            assert!(!pcs.is_empty() && pcs.len() <= MAX_FRAMES, "{} frames", pcs.len());
        }
        let pcs = unwinding.unwind(me(), &UserStack { bytes: vec![0xff; 24], ..real.clone() }, 3);
        assert!(pcs.unwrap().len() <= 3);
        // No copy at all: the frame-pointer chain stays.
        assert_eq!(unwinding.unwind(me(), &UserStack { bytes: Vec::new(), ..real }, 3), None);
    }

    #[test]
    fn bogus_cfi_never_panics_or_loops() {
        // This test binary with its .eh_frame_hdr and .eh_frame overwritten with noise.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let mut bogus = exe.clone();
        let elf = object::File::parse(&exe[..]).unwrap();
        let mut noise = 0x2545_f491_4f6c_dd1du64;
        for name in [".eh_frame_hdr", ".eh_frame"] {
            let (offset, size) = elf.section_by_name(name).unwrap().file_range().unwrap();
            for byte in &mut bogus[offset as usize..(offset + size) as usize] {
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                *byte = noise as u8;
            }
        }
        let dir = std::env::temp_dir().join(format!("libpmc-bogus-cfi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("image");
        std::fs::write(&path, &bogus).unwrap();
        let own = std::fs::read_link("/proc/self/exe").unwrap();
        let own = own.as_os_str().as_encoded_bytes();
        let mut unwinding = Unwinding::default();
        let fake: Pid = -77;
        unwinding.exec(fake);
        for (mapping, image) in executable_mappings(me()) {
            if image == own {
                unwinding.map(fake, mapping, path.as_os_str().as_encoded_bytes());
            }
        }
        let stack = nested_stack(8, 8192).unwrap();
        if let Some(pcs) = unwinding.unwind(fake, &stack, MAX_FRAMES) {
            assert!(pcs.len() <= MAX_FRAMES);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn maps_lines_give_executable_file_mappings_only() {
        let line = b"7f12a000-7f12c000 r-xp 00002000 08:01 1234        /usr/lib/libc.so.6";
        let (mapping, path) = parse_maps_line(line).unwrap();
        assert_eq!(mapping, Mapping { addr: 0x7f12a000, len: 0x2000, pgoff: 0x2000 });
        assert_eq!(path, b"/usr/lib/libc.so.6");
        assert_eq!(parse_maps_line(b"7f12a000-7f12c000 rw-p 00000000 08:01 1 /usr/lib/x"), None);
        let vdso = parse_maps_line(b"7ffd000-7ffe000 r-xp 00000000 00:00 0 [vdso]").unwrap();
        assert_eq!(vdso, (Mapping { addr: 0x7ffd000, len: 0x1000, pgoff: 0 }, VDSO_NAME.to_vec()));
        assert_eq!(parse_maps_line(b"7ffd000-7ffe000 r--p 00000000 00:00 0 [vvar]"), None);
        assert_eq!(parse_maps_line(b"2000-1000 r-xp 00000000 08:01 1 /bin/x"), None);
        assert_eq!(parse_maps_line(b"junk"), None);
    }
}
