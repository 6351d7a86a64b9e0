//! Memory: the boot page tables identity-map 4 GiB with 2 MiB pages; here ring 3 gets the user
//! pages, the local APIC's page is made uncached, and the kernel heap is set up.

use crate::boot::BOOT_PAGE_TABLES;
use ring0_abi as abi;

const USER: u64 = 1 << 2;
const WRITE_THROUGH: u64 = 1 << 3;
const CACHE_DISABLE: u64 = 1 << 4;
const PAGE: u64 = 2 << 20;

/// Bytes of the kernel heap.
const HEAP: usize = 32 << 20;

#[repr(C, align(4096))]
struct HeapMemory([u8; HEAP]);

static mut HEAP_MEMORY: HeapMemory = HeapMemory([0; HEAP]);

#[global_allocator]
static ALLOCATOR: linked_list_allocator::LockedHeap = linked_list_allocator::LockedHeap::empty();

/// Marks `USER_IMAGE_BASE..USER_END` user-accessible, the xAPIC page uncached, and sets up the
/// heap. On the BSP, before any other CPU starts (they share these page tables).
pub fn init() {
    // SAFETY: only the BSP runs, before any other CPU uses the page tables; the entries changed
    // map memory nothing in the kernel uses (the user pages) or the APIC's registers.
    unsafe {
        let tables = &raw mut BOOT_PAGE_TABLES;
        let pd = &mut (*tables).pd;
        let mut page = abi::USER_IMAGE_BASE;
        while page < abi::USER_END {
            let index = (page / PAGE) as usize;
            pd[index / 512][index % 512] |= USER;
            page += PAGE;
        }
        let apic = (0xFEE0_0000 / PAGE) as usize;
        pd[apic / 512][apic % 512] |= CACHE_DISABLE | WRITE_THROUGH;
        // The PML4 and PDPT entries must allow ring 3 too (the page's own bit decides).
        (*tables).pml4[0] |= USER;
        (*tables).pdpt[0] |= USER;
        (*tables).pdpt[1] |= USER;
        (*tables).pdpt[2] |= USER;
        (*tables).pdpt[3] |= USER;
        crate::cpu::flush_tlb();
        ALLOCATOR.lock().init((&raw mut HEAP_MEMORY).cast::<u8>(), HEAP);
    }
}

/// Whether `addr..addr + len` lies in user memory (checked without overflow).
pub fn is_user_range(addr: u64, len: usize) -> bool {
    addr >= abi::USER_IMAGE_BASE
        && addr.checked_add(len as u64).is_some_and(|end| end <= abi::USER_END)
}
