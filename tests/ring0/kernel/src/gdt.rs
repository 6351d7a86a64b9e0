//! The GDT (kernel and user segments, one TSS descriptor per CPU), and setting the kernel stack
//! ring 3 enters on (the TSS's RSP0, at each switch; the TSS itself is in `tss.rs`).

use crate::percpu::{Cpu, MAX_CPUS};
use crate::tss::Tss;

/// Kernel code selector.
pub const KERNEL_CODE: u16 = 0x08;
/// Kernel data selector.
pub const KERNEL_DATA: u16 = 0x10;
/// User data selector (RPL 3).
pub const USER_DATA: u16 = 0x20 | 3;
/// User code selector (RPL 3).
pub const USER_CODE: u16 = 0x28 | 3;
/// The first TSS descriptor (two slots per CPU).
const TSS_FIRST: usize = 6;

/// Null, kernel code (0x08), kernel data (0x10), 32-bit code (0x18, the AP trampoline's), user
/// data (0x20), user code (0x28), then a 16-byte TSS descriptor per CPU.
static mut GDT: [u64; TSS_FIRST + 2 * MAX_CPUS] = {
    let mut gdt = [0u64; TSS_FIRST + 2 * MAX_CPUS];
    gdt[1] = 0x00af_9a00_0000_ffff;
    gdt[2] = 0x00cf_9200_0000_ffff;
    gdt[3] = 0x00cf_9a00_0000_ffff;
    gdt[4] = 0x00cf_f200_0000_ffff;
    gdt[5] = 0x00af_fa00_0000_ffff;
    gdt
};

#[repr(C, packed)]
struct Pointer {
    limit: u16,
    base: u64,
}

/// Loads the GDT and this CPU's TSS (with its IST stacks) on `cpu`, the CPU executing the call.
pub fn init(cpu: &Cpu) {
    let tss = cpu.tss.get();
    // SAFETY: `cpu` is the executing CPU, the only one touching its TSS; the GDT slots written are
    // this CPU's own TSS descriptor, and CPUs start one at a time.
    unsafe {
        (*tss).ist[0] = cpu.nmi_stack_top();
        (*tss).ist[1] = cpu.df_stack_top();
        let base = tss as u64;
        let limit = (core::mem::size_of::<Tss>() - 1) as u64;
        let slot = TSS_FIRST + 2 * cpu.index as usize;
        let gdt = &raw mut GDT;
        (*gdt)[slot] = limit & 0xffff
            | (base & 0xff_ffff) << 16
            | 0x89 << 40
            | (limit >> 16 & 0xf) << 48
            | (base >> 24 & 0xff) << 56;
        (*gdt)[slot + 1] = base >> 32;
        let pointer = Pointer {
            limit: (core::mem::size_of::<[u64; TSS_FIRST + 2 * MAX_CPUS]>() - 1) as u16,
            base: gdt as u64,
        };
        core::arch::asm!(
            "lgdt [{ptr}]",
            "push {code}",
            "lea {tmp}, [rip + 2f]",
            "push {tmp}",
            "retfq",
            "2:",
            "mov ds, {data:x}",
            "mov es, {data:x}",
            "mov ss, {data:x}",
            "ltr {tss:x}",
            ptr = in(reg) &pointer,
            code = in(reg) u64::from(KERNEL_CODE),
            data = in(reg) u64::from(KERNEL_DATA),
            tss = in(reg) (slot * 8) as u64,
            tmp = out(reg) _,
        );
    }
}

/// Sets the stack ring 3 enters this CPU's kernel on (the running thread's kernel stack top).
pub fn set_kernel_stack(cpu: &Cpu, top: u64) {
    // SAFETY: each CPU writes only its own TSS, with interrupts disabled (the scheduler).
    unsafe { (*cpu.tss.get()).rsp[0] = top }
}
