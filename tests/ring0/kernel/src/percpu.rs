//! Each CPU's kernel state, reached through the GS base (set once per CPU; ring 3 never changes
//! it: the kernel does not enable FSGSBASE, and the test program loads no segment registers).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::thread::Thread;
use crate::tss::Tss;

/// The most CPUs the kernel brings up.
pub const MAX_CPUS: usize = 8;
/// Bytes of each CPU's NMI and double-fault stacks.
const IST_STACK: usize = 16 * 1024;

/// A closure another CPU asked this one to run (see `ipi::run_on_cpu`): a pointer to the
/// caller's `&mut dyn FnMut()`, which outlives the call because the caller waits for it.
pub struct CallSlot {
    pub request: AtomicPtr<&'static mut dyn FnMut()>,
    /// Serializes callers of this CPU.
    pub busy: AtomicBool,
}

/// One CPU.
#[repr(C, align(64))]
pub struct Cpu {
    /// Its index (first: `current()` reads it at GS:0).
    pub index: u32,
    pub apic_id: AtomicU32,
    pub online: AtomicBool,
    pub tss: UnsafeCell<Tss>,
    /// The scheduler's saved stack pointer while a thread runs here.
    pub sched_rsp: UnsafeCell<u64>,
    /// The thread running here (null in the scheduler and when idle).
    pub current: AtomicPtr<Thread>,
    /// The running thread's kernel stack, `lo..hi` (0..0 when none): read by the NMI handler.
    pub kstack_lo: AtomicU64,
    pub kstack_hi: AtomicU64,
    /// Local APIC timer interrupts handled.
    pub ticks: AtomicU64,
    /// NMIs handled, and how many of them the driver claimed.
    pub nmis: AtomicU64,
    pub nmis_claimed: AtomicU64,
    /// Call requests run here.
    pub calls: AtomicU64,
    /// Ticks of the current thread's time slice.
    pub slice: AtomicU32,
    pub call: CallSlot,
    pub nmi_stack: UnsafeCell<[u8; IST_STACK]>,
    pub df_stack: UnsafeCell<[u8; IST_STACK]>,
}

// SAFETY: the `UnsafeCell` fields are each touched by their own CPU only (its TSS, its scheduler's
// stack pointer, its interrupt stacks), after the BSP initialized them before starting that CPU;
// everything shared is atomic.
unsafe impl Sync for Cpu {}

impl Cpu {
    const fn new(index: u32) -> Self {
        Cpu {
            index,
            apic_id: AtomicU32::new(0),
            online: AtomicBool::new(false),
            tss: UnsafeCell::new(Tss::new()),
            sched_rsp: UnsafeCell::new(0),
            current: AtomicPtr::new(core::ptr::null_mut()),
            kstack_lo: AtomicU64::new(0),
            kstack_hi: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            nmis: AtomicU64::new(0),
            nmis_claimed: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            slice: AtomicU32::new(0),
            call: CallSlot {
                request: AtomicPtr::new(core::ptr::null_mut()),
                busy: AtomicBool::new(false),
            },
            nmi_stack: UnsafeCell::new([0; IST_STACK]),
            df_stack: UnsafeCell::new([0; IST_STACK]),
        }
    }

    /// The top of this CPU's NMI stack.
    pub fn nmi_stack_top(&self) -> u64 {
        self.nmi_stack.get() as u64 + IST_STACK as u64
    }

    /// The top of this CPU's double-fault stack.
    pub fn df_stack_top(&self) -> u64 {
        self.df_stack.get() as u64 + IST_STACK as u64
    }
}

static CPUS: [Cpu; MAX_CPUS] = {
    let mut cpus = [const { Cpu::new(0) }; MAX_CPUS];
    let mut i = 0;
    while i < MAX_CPUS {
        cpus[i].index = i as u32;
        i += 1;
    }
    cpus
};

/// CPU `index`.
pub fn cpu(index: u32) -> &'static Cpu {
    &CPUS[index as usize]
}

/// The CPUs that are online.
pub fn online() -> impl Iterator<Item = &'static Cpu> {
    CPUS.iter().filter(|c| c.online.load(Ordering::Acquire))
}

/// The number of CPUs online.
pub fn online_count() -> u32 {
    online().count() as u32
}

/// Points this CPU's GS base at `CPUS[index]` (once, when the CPU starts).
pub fn init(index: u32) {
    const IA32_GS_BASE: u32 = 0xC000_0101;
    // SAFETY: IA32_GS_BASE exists on every x86_64 CPU; the kernel reads it only through `index()`.
    unsafe { crate::cpu::wrmsr(IA32_GS_BASE, &CPUS[index as usize] as *const Cpu as u64) }
}

/// The index of the CPU executing the caller.
pub fn index() -> u32 {
    let index: u32;
    // SAFETY: GS:0 is `Cpu::index` of this CPU (`init`), a plain u32 read.
    unsafe {
        core::arch::asm!("mov {:e}, gs:[0]", out(reg) index, options(nostack, readonly, preserves_flags))
    }
    index
}

/// The CPU executing the caller.
pub fn this() -> &'static Cpu {
    cpu(index())
}
