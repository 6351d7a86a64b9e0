//! The trap frame: the registers the entry stubs of `trap.rs` save, and `trap_return`, the code
//! that restores one and returns to it. Apart from `trap.rs` because the interrupt handlers and the
//! scheduler use the frame while `trap.rs` calls into the interrupt handlers.

/// The registers saved at a trap, lowest address first.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TrapFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    pub vector: u64,
    pub error: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

impl TrapFrame {
    /// Whether the trap came from ring 3.
    pub fn is_user(&self) -> bool {
        self.cs & 3 == 3
    }
}

unsafe extern "C" {
    /// The second half of `trap_common` (in `trap.rs`): restores a trap frame at RSP and returns
    /// to it. A new thread's kernel stack starts with its address.
    pub fn trap_return();
}
