//! The elements of a profile's stacks: frames (functions, or addresses that could not be
//! resolved) and locations (exact program counters in a frame). They are types of their own so
//! that the profile builder and the memory budget that prices its tables both use them without
//! importing each other.

use std::sync::Arc;

/// An index into [`Profile::frames`](crate::Profile::frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(u32);

impl FrameId {
    /// The id of the frame at `index` in [`Profile::frames`](crate::Profile::frames).
    pub(crate) fn new(index: u32) -> FrameId {
        FrameId(index)
    }

    /// The index of the frame in [`Profile::frames`](crate::Profile::frames).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A function (or, where it cannot be resolved, an address) in an image.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The image as the log names it (`/usr/lib/libc.so.7`), or [`KERNEL_IMAGE`](crate::KERNEL_IMAGE) /
    /// [`UNKNOWN_IMAGE`](crate::UNKNOWN_IMAGE) for addresses that no mapping covers.
    pub image: Arc<str>,
    /// The function's name, demangled; `None` when unresolved.
    pub symbol: Option<Arc<str>>,
    /// The address in the image's link-time addresses (what `nm` prints): the function's start
    /// when resolved (unless [`ResolveOptions::show_offsets`](crate::ResolveOptions::show_offsets)), otherwise the exact address. For
    /// images that could not be read, and for addresses no mapping covers, the run-time address.
    pub address: u64,
    /// With [`ResolveOptions::show_offsets`](crate::ResolveOptions::show_offsets), the offset of the address inside the function.
    pub offset: Option<u64>,
}

impl Frame {
    /// The frame as pmcstat prints it: the symbol (`hot`), the symbol and offset (`hot+0x1a`)
    /// with `-I`, or the address as `%p` does (`0x401136`).
    pub fn name(&self) -> String {
        match (&self.symbol, self.offset) {
            (Some(symbol), Some(offset)) => format!("{symbol}+{offset:#x}"),
            (Some(symbol), None) => symbol.to_string(),
            (None, _) => format!("{:#x}", self.address),
        }
    }

    /// The last component of the image's path (`libc.so.7`).
    pub fn image_basename(&self) -> &str {
        self.image.rsplit('/').next().unwrap_or(&self.image)
    }
}

/// One program counter of a sample: the frame it resolved to, and the exact address.
///
/// Frames merge program counters (all the addresses in a function are one frame); a location
/// keeps the address itself, for outputs that work at instruction level (`-g` histograms and
/// arcs, `-F` positions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    /// The frame the program counter belongs to.
    pub frame: FrameId,
    /// The program counter in the image's link-time addresses when it lies in a mapping of an
    /// image that could be read (then [`Profile::text_range`](crate::Profile::text_range) of the frame's image is `Some`);
    /// otherwise the run-time address.
    pub address: u64,
    /// Whether the program counter is a return address (a caller's frame, not the sampled
    /// instruction): its source position is then that of the call, the byte before it (the
    /// return address is the next instruction, often on the next line or in the next inlined
    /// function).
    pub return_address: bool,
}
