//! The 64-bit task-state segment: the kernel stack ring 3 enters on (RSP0) and the NMI and
//! double-fault stacks (IST1, IST2). Each CPU holds its own (`percpu.rs`); `gdt.rs` describes it.

/// The 64-bit task-state segment.
#[repr(C, packed(4))]
pub struct Tss {
    _reserved0: u32,
    pub rsp: [u64; 3],
    _reserved1: u64,
    pub ist: [u64; 7],
    _reserved2: u64,
    _reserved3: u16,
    iomap_base: u16,
}

impl Tss {
    pub const fn new() -> Self {
        Tss {
            _reserved0: 0,
            rsp: [0; 3],
            _reserved1: 0,
            ist: [0; 7],
            _reserved2: 0,
            _reserved3: 0,
            iomap_base: core::mem::size_of::<Tss>() as u16,
        }
    }
}
