//! From QEMU's PVH entry to Rust, and the AP trampoline.
//!
//! `qemu-system-x86_64 -kernel kernel.elf` loads this ELF where it is linked and, finding the Xen
//! PHYS32_ENTRY note, enters `pvh_start` in 32-bit protected mode with paging off (the PVH boot
//! protocol). The code here builds page tables that identity-map the first 4 GiB with 2 MiB pages,
//! enters long mode and calls `kernel_main` on the boot stack. Application processors start in
//! real mode at `AP_TRAMPOLINE` (a copy of `ap_trampoline`), go through protected mode to long
//! mode with the same page tables, and call `ap_main` on the stack the BSP left in `AP_STACK`.

use core::arch::global_asm;

/// Where the AP trampoline is copied (a page below 1 MiB; the SIPI vector is its page number).
pub const AP_TRAMPOLINE: u64 = 0x8000;

/// Bytes of the boot CPU's stack (its scheduler runs on it).
const BOOT_STACK: usize = 64 * 1024;

/// The boot page tables: PML4, one PDPT, four page directories of 2 MiB pages.
#[repr(C, align(4096))]
pub struct PageTables {
    pub pml4: [u64; 512],
    pub pdpt: [u64; 512],
    pub pd: [[u64; 512]; 4],
}

#[unsafe(no_mangle)]
pub static mut BOOT_PAGE_TABLES: PageTables =
    PageTables { pml4: [0; 512], pdpt: [0; 512], pd: [[0; 512]; 4] };

#[repr(C, align(16))]
struct Stack([u8; BOOT_STACK]);

#[unsafe(no_mangle)]
static mut BOOT_STACK_MEM: Stack = Stack([0; BOOT_STACK]);

/// The stack pointer the next AP starts with (set by the BSP before its SIPI).
#[unsafe(no_mangle)]
pub static AP_STACK: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

// The Xen ELF note QEMU's PVH loader looks for: type 18 (XEN_ELFNOTE_PHYS32_ENTRY), name "Xen",
// the 32-bit entry point as an 8-byte value (QEMU reads a 64-bit word from a 64-bit ELF).
global_asm!(
    r#"
    .section .note.Xen, "a", @note
    .balign 4
    .long 4
    .long 8
    .long 18
    .asciz "Xen"
    .balign 4
    .quad pvh_start
    .balign 4
    "#,
    options(att_syntax)
);

// The boot GDT: null, 64-bit code (0x08), data (0x10), 32-bit code (0x18). `gdt::init` replaces it
// with the full GDT (user segments and TSSs) on each CPU.
global_asm!(
    r#"
    .section .rodata
    .balign 16
    .global boot_gdt
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff
    .quad 0x00cf92000000ffff
    .quad 0x00cf9a000000ffff
boot_gdt_end:
    .balign 16
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .quad boot_gdt

    .section .boot.text, "ax"
    .code32
    .global pvh_start
pvh_start:
    cli
    cld
    movl $(BOOT_STACK_MEM + {stack}), %esp
    movl %ebx, %ebp

    /* PML4[0] -> PDPT; PDPT[0..4] -> PD[0..4]; PD entries: 2 MiB pages, present + writable. */
    movl $BOOT_PAGE_TABLES, %edi
    leal 0x1000(%edi), %eax
    orl $3, %eax
    movl %eax, (%edi)
    leal 0x1000(%edi), %esi
    leal 0x2000(%edi), %eax
    orl $3, %eax
    movl $4, %ecx
1:  movl %eax, (%esi)
    addl $0x1000, %eax
    addl $8, %esi
    loop 1b
    leal 0x2000(%edi), %esi
    movl $0x83, %eax
    xorl %edx, %edx
    movl $2048, %ecx
2:  movl %eax, (%esi)
    movl %edx, 4(%esi)
    addl $0x200000, %eax
    adcl $0, %edx
    addl $8, %esi
    loop 2b

    movl %cr4, %eax
    orl $0x20, %eax
    movl %eax, %cr4
    movl $BOOT_PAGE_TABLES, %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx
    rdmsr
    orl $0x100, %eax
    wrmsr
    movl %cr0, %eax
    orl $0x80000001, %eax
    movl %eax, %cr0
    lgdt boot_gdt_ptr
    ljmp $0x08, $long_start

    .code64
long_start:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movl %ebp, %edi
    xorl %ebp, %ebp
    call kernel_main
3:  hlt
    jmp 3b

    /* The AP trampoline, copied to AP_TRAMPOLINE and entered there in real mode. */
    .code16
    .global ap_trampoline
ap_trampoline:
    cli
    cld
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl ({tramp} + ap_gdt_ptr - ap_trampoline)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x18, $({tramp} + ap_protected - ap_trampoline)
    .code32
ap_protected:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movl %cr4, %eax
    orl $0x20, %eax
    movl %eax, %cr4
    movl $BOOT_PAGE_TABLES, %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx
    rdmsr
    orl $0x100, %eax
    wrmsr
    movl %cr0, %eax
    orl $0x80000000, %eax
    movl %eax, %cr0
    ljmp $0x08, $ap_long
    .balign 8
ap_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .long boot_gdt
    .global ap_trampoline_end
ap_trampoline_end:

    .code64
ap_long:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movq AP_STACK(%rip), %rsp
    xorl %ebp, %ebp
    call ap_main
4:  hlt
    jmp 4b
    "#,
    stack = const BOOT_STACK,
    tramp = const AP_TRAMPOLINE,
    options(att_syntax)
);

unsafe extern "C" {
    static ap_trampoline: u8;
    static ap_trampoline_end: u8;
}

/// Copies the AP trampoline to [`AP_TRAMPOLINE`].
pub fn install_ap_trampoline() {
    // SAFETY: both symbols are labels of the trampoline in this image; the destination page is
    // identity-mapped low memory that nothing else uses (below the 1 MiB the kernel starts at).
    unsafe {
        let start = &raw const ap_trampoline;
        let len = (&raw const ap_trampoline_end).offset_from(start) as usize;
        core::ptr::copy_nonoverlapping(start, AP_TRAMPOLINE as *mut u8, len);
    }
}
