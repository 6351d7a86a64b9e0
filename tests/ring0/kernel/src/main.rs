//! A minimal x86_64 kernel that embeds the hwpmc driver in ring 0: the worked example of
//! README's "Embedding the driver in a kernel", and the test `tests/ring0/run.sh` runs.
//!
//! QEMU boots it through the PVH entry (`boot.rs`); the BSP sets up the console, memory, the
//! GDT/TSS and IDT, measures the TSC, starts the other CPUs (INIT-SIPI-SIPI), loads the driver,
//! starts the ring-3 test program as process 1 and schedules until every process has ended; then
//! it unloads the driver, reports what each CPU handled and ends QEMU.
#![no_std]
#![no_main]

extern crate alloc;

mod apic;
mod boot;
mod console;
mod cpu;
mod frame;
mod gdt;
mod hooks;
mod interrupt;
mod ipi;
mod memory;
mod percpu;
mod pmc;
mod port;
mod sched;
mod syscall;
mod thread;
mod time;
mod trap;
mod tss;
mod user;
mod vectors;

use core::sync::atomic::{AtomicU32, Ordering};

use ring0_abi as abi;

/// Timer interrupts a second on every CPU.
const HZ: u32 = 1000;

/// The index the next AP takes (set by the BSP before its SIPI).
static AP_INDEX: AtomicU32 = AtomicU32::new(0);

/// The BSP's entry from `boot.rs`, with the physical address of the PVH start info.
#[unsafe(no_mangle)]
extern "C" fn kernel_main(start_info: u32) -> ! {
    console::init();
    println!("ring0: booting");
    memory::init();
    trap::build();
    let bsp = percpu::cpu(0);
    percpu::init(0);
    gdt::init(bsp);
    trap::load();
    time::calibrate();
    apic::init(true);
    bsp.apic_id.store(apic::id(), Ordering::Relaxed);
    apic::calibrate_timer();
    bsp.online.store(true, Ordering::Release);
    if time::tsc_hz() < 100_000_000 {
        println!("ring0: FAIL the TSC measured {} Hz: no PIT on port 0x61?", time::tsc_hz());
        console::exit_qemu(console::EXIT_FAILURE);
    }
    println!(
        "ring0: TSC {} MHz, local APIC in {} mode",
        time::tsc_hz() / 1_000_000,
        if apic::is_x2apic() { "x2APIC" } else { "xAPIC" }
    );

    let cpus = requested_cpus(start_info);
    boot::install_ap_trampoline();
    for index in 1..cpus {
        start_ap(index);
    }
    println!("ring0: {} CPUs online", percpu::online_count());
    apic::start_timer(HZ);

    if let Err(e) = pmc::load() {
        println!("ring0: FAIL the driver refused to load: {e}");
        console::exit_qemu(console::EXIT_FAILURE);
    }
    println!("ring0: driver loaded (cpuid {})", pmc::cpuid_string());

    user::load();
    sched::spawn_process(0, b"/bin/pmctest", abi::ROLE_TEST);
    sched::run(bsp);

    pmc::unload();
    println!("ring0: driver unloaded");
    for cpu in percpu::online() {
        println!(
            "ring0: cpu {} ticks {} nmis {} claimed {} calls {}",
            cpu.index,
            cpu.ticks.load(Ordering::Relaxed),
            cpu.nmis.load(Ordering::Relaxed),
            cpu.nmis_claimed.load(Ordering::Relaxed),
            cpu.calls.load(Ordering::Relaxed),
        );
    }
    println!(
        "ring0: log bytes {} signals {}",
        pmc::LOG_BYTES.load(Ordering::Relaxed),
        pmc::SIGNALS.load(Ordering::Relaxed)
    );
    println!("ring0: done in {} ms", time::nanos_since_boot() / 1_000_000);
    console::exit_qemu(console::EXIT_SUCCESS)
}

/// `cpus=N` on the command line (QEMU's `-append`), 2 by default, at most `MAX_CPUS`.
fn requested_cpus(start_info: u32) -> u32 {
    // SAFETY: QEMU's PVH loader passes `struct hvm_start_info`, whose `cmdline_paddr` (offset 24)
    // is 0 or a NUL-terminated string, in identity-mapped low memory.
    let cmdline = unsafe {
        let address = core::ptr::read_unaligned((start_info as u64 + 24) as *const u64);
        if address == 0 {
            b"" as &[u8]
        } else {
            core::ffi::CStr::from_ptr(address as *const core::ffi::c_char).to_bytes()
        }
    };
    let text = core::str::from_utf8(cmdline).unwrap_or("");
    let requested =
        text.split(' ').find_map(|w| w.strip_prefix("cpus=")).and_then(|n| n.parse().ok());
    requested.unwrap_or(2).clamp(1, percpu::MAX_CPUS as u32)
}

/// Starts the AP with APIC id `index` (QEMU numbers them from 0) and waits until it is online.
fn start_ap(index: u32) {
    let stack = alloc::vec![0u128; 64 * 1024 / 16].leak();
    boot::AP_STACK.store(stack.as_ptr() as u64 + 64 * 1024, Ordering::Relaxed);
    AP_INDEX.store(index, Ordering::Release);
    apic::start_ap(index, (boot::AP_TRAMPOLINE >> 12) as u8);
    let deadline = cpu::rdtsc() + time::tsc_hz();
    while !percpu::cpu(index).online.load(Ordering::Acquire) {
        if cpu::rdtsc() > deadline {
            println!("ring0: FAIL CPU {index} did not start");
            console::exit_qemu(console::EXIT_FAILURE);
        }
        core::hint::spin_loop();
    }
}

/// An AP's entry from the trampoline, on the stack the BSP gave it.
#[unsafe(no_mangle)]
extern "C" fn ap_main() -> ! {
    let index = AP_INDEX.load(Ordering::Acquire);
    let cpu = percpu::cpu(index);
    percpu::init(index);
    gdt::init(cpu);
    trap::load();
    apic::init(false);
    cpu.apic_id.store(apic::id(), Ordering::Relaxed);
    cpu.online.store(true, Ordering::Release);
    apic::start_timer(HZ);
    sched::run(cpu);
    loop {
        // Every process has ended: serve IPIs (the driver's unload) until QEMU ends.
        cpu::wait_for_interrupt();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    console::print_unlocked(format_args!("\nring0: PANIC on cpu {}: {info}\n", percpu::index()));
    console::exit_qemu(console::EXIT_FAILURE)
}
