//! The IDT, the entry stubs of every vector the kernel handles, and the trap frame they build.
//!
//! Each stub pushes an error code (0 when the CPU pushes none) and its vector, `trap_common`
//! pushes the general registers and calls [`crate::interrupt::dispatch`] with the frame, then
//! restores them and returns with `iretq` (`trap_return`, also where a new thread first starts).
//! The frame's layout is in `frame.rs`, the vector numbers in `vectors.rs`.

use core::arch::global_asm;

use crate::frame::TrapFrame;
use crate::gdt::KERNEL_CODE;
use crate::vectors::{DOUBLE_FAULT, NMI, SYSCALL};

global_asm!(
    r#"
    .section .text
    .irp n, 0,1,2,3,4,5,6,7,9,15,16,18,19,20,28,32,128,240,255
trap_stub_\n:
    pushq $0
    pushq $\n
    jmp trap_common
    .endr
    .irp n, 8,10,11,12,13,14,17,21,29,30
trap_stub_\n:
    pushq $\n
    jmp trap_common
    .endr

trap_common:
    pushq %rax
    pushq %rbx
    pushq %rcx
    pushq %rdx
    pushq %rsi
    pushq %rdi
    pushq %rbp
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    cld
    movq %rsp, %rdi
    /* A kernel callchain ends here: the interrupted RBP is in the frame, not a frame record. */
    xorl %ebp, %ebp
    call trap_dispatch
    .global trap_return
trap_return:
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rbp
    popq %rdi
    popq %rsi
    popq %rdx
    popq %rcx
    popq %rbx
    popq %rax
    addq $16, %rsp
    iretq

    .section .rodata
    .balign 8
    .global trap_stubs
trap_stubs:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,28,29,30,32,128,240,255
    .quad \n, trap_stub_\n
    .endr
    .global trap_stubs_end
trap_stubs_end:
    "#,
    options(att_syntax)
);

unsafe extern "C" {
    static trap_stubs: [u64; 0];
    static trap_stubs_end: [u64; 0];
}

#[unsafe(no_mangle)]
extern "C" fn trap_dispatch(frame: &mut TrapFrame) {
    crate::interrupt::dispatch(frame);
}

#[derive(Clone, Copy)]
#[repr(C)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    attributes: u8,
    offset_mid: u16,
    offset_high: u32,
    _zero: u32,
}

static mut IDT: [Gate; 256] = [Gate {
    offset_low: 0,
    selector: 0,
    ist: 0,
    attributes: 0,
    offset_mid: 0,
    offset_high: 0,
    _zero: 0,
}; 256];

#[repr(C, packed)]
struct Pointer {
    limit: u16,
    base: u64,
}

/// Fills the IDT (once, on the BSP): an interrupt gate per stub; the NMI on IST1, the double fault
/// on IST2; the system call callable from ring 3.
pub fn build() {
    // SAFETY: `trap_stubs..trap_stubs_end` is the (vector, address) table above; the IDT is
    // written before any CPU loads it.
    unsafe {
        let mut entry = (&raw const trap_stubs).cast::<u64>();
        let end = (&raw const trap_stubs_end).cast::<u64>();
        let idt = &raw mut IDT;
        while entry < end {
            let vector = *entry as u8;
            let address = *entry.add(1);
            let ist = match vector {
                NMI => 1,
                DOUBLE_FAULT => 2,
                _ => 0,
            };
            let dpl = if vector == SYSCALL { 3 } else { 0 };
            (*idt)[vector as usize] = Gate {
                offset_low: address as u16,
                selector: KERNEL_CODE,
                ist,
                attributes: 0x8E | dpl << 5,
                offset_mid: (address >> 16) as u16,
                offset_high: (address >> 32) as u32,
                _zero: 0,
            };
            entry = entry.add(2);
        }
    }
}

/// Loads the IDT on this CPU.
pub fn load() {
    let pointer = Pointer {
        limit: (core::mem::size_of::<[Gate; 256]>() - 1) as u16,
        base: (&raw const IDT) as u64,
    };
    // SAFETY: the IDT is built (`build`) and lives forever.
    unsafe {
        core::arch::asm!("lidt [{}]", in(reg) &pointer, options(readonly, nostack, preserves_flags))
    }
}
