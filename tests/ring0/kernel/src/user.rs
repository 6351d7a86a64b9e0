//! The ring-3 program: a static ELF built from `tests/ring0/user`, embedded in the kernel and
//! loaded once at `USER_IMAGE_BASE` (every process runs it; it has no writable statics).

use core::sync::atomic::{AtomicU64, Ordering};

use ring0_abi as abi;

static IMAGE: &[u8] = include_bytes!(env!("RING0_USER_ELF"));

static ENTRY: AtomicU64 = AtomicU64::new(0);
static TEXT_START: AtomicU64 = AtomicU64::new(0);
static TEXT_END: AtomicU64 = AtomicU64::new(0);

fn u16_at(at: usize) -> u16 {
    u16::from_le_bytes([IMAGE[at], IMAGE[at + 1]])
}
fn u32_at(at: usize) -> u32 {
    u32::from_le_bytes(IMAGE[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(at: usize) -> u64 {
    u64::from_le_bytes(IMAGE[at..at + 8].try_into().expect("8 bytes"))
}

/// Copies the program's PT_LOAD segments to their addresses (which must be user memory) and
/// zeroes their BSS.
pub fn load() {
    assert!(
        IMAGE.len() > 64 && &IMAGE[..4] == b"\x7fELF" && IMAGE[4] == 2,
        "the user program is not an ELF64"
    );
    let phoff = u64_at(0x20) as usize;
    let phentsize = usize::from(u16_at(0x36));
    let phnum = usize::from(u16_at(0x38));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(ph) != 1 {
            continue;
        }
        let flags = u32_at(ph + 4);
        let offset = u64_at(ph + 8) as usize;
        let vaddr = u64_at(ph + 16);
        let filesz = u64_at(ph + 32) as usize;
        let memsz = u64_at(ph + 40) as usize;
        assert!(
            crate::memory::is_user_range(vaddr, memsz)
                && vaddr + memsz as u64 <= abi::USER_STACKS_BASE
                && filesz <= memsz,
            "a segment of the user program lies outside its image"
        );
        // SAFETY: the destination is user memory reserved for the image (checked above), the
        // source lies within the embedded file (slicing checks it).
        unsafe {
            let source = &IMAGE[offset..offset + filesz];
            core::ptr::copy_nonoverlapping(source.as_ptr(), vaddr as *mut u8, filesz);
            core::ptr::write_bytes((vaddr + filesz as u64) as *mut u8, 0, memsz - filesz);
        }
        if flags & 1 != 0 {
            TEXT_START.store(vaddr, Ordering::Relaxed);
            TEXT_END.store(vaddr + memsz as u64, Ordering::Relaxed);
        }
    }
    ENTRY.store(u64_at(0x18), Ordering::Relaxed);
}

/// The program's entry point.
pub fn entry() -> u64 {
    ENTRY.load(Ordering::Relaxed)
}

/// The program's executable mapping.
pub fn image_range() -> (u64, u64) {
    (TEXT_START.load(Ordering::Relaxed), TEXT_END.load(Ordering::Relaxed))
}
