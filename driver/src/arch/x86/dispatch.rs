//! The x86 backend the driver runs: Intel's or AMD's, chosen at load from the CPU's vendor
//! (FreeBSD's `pmc_md_initialize` dispatch). Each method delegates to the chosen backend; a
//! value of the other vendor (which the chosen backend never hands out) is ignored.

use core::ops::Range;

use super::amd::discovery::AmdPmu;
use super::amd::{AmdBackend, AmdConfig, AmdCounter, AmdCpu, AmdPmi};
use super::cpuid::CpuSignature;
use super::intel::discovery::IntelPmu;
use super::intel::{IntelBackend, IntelConfig, IntelCounter, IntelCpu, IntelPmi};
use crate::abi::Class;
use crate::backend::{
    AllocateRequest, CounterMask, CpuIdString, HardwareClass, Overflow, PmuBackend, RawEvent,
};
use crate::errno::Errno;
use crate::hw::Hardware;

/// The machine's PMU backend, by vendor.
#[derive(Debug)]
pub enum X86Backend {
    /// Intel architectural performance monitoring.
    Intel(IntelBackend),
    /// AMD core performance counters.
    Amd(AmdBackend),
}

/// What discovery found on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum X86Pmu {
    /// An Intel PMU.
    Intel(IntelPmu),
    /// AMD core counters.
    Amd(AmdPmu),
}

/// One CPU's state.
#[derive(Debug)]
pub enum X86Cpu {
    /// An Intel CPU's.
    Intel(IntelCpu),
    /// An AMD CPU's.
    Amd(AmdCpu),
}

/// The counter behind a row on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum X86Counter {
    /// An Intel counter.
    Intel(IntelCounter),
    /// An AMD core counter.
    Amd(AmdCounter),
}

/// A hardware class's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum X86Config {
    /// An IAP or IAF configuration.
    Intel(IntelConfig),
    /// A K8 configuration.
    Amd(AmdConfig),
}

/// What the PMI handler read.
#[derive(Debug, Clone, Copy)]
pub enum X86Pmi {
    /// Intel's global status.
    Intel(IntelPmi),
    /// AMD's global status.
    Amd(AmdPmi),
}

/// `overflow` with its status wrapped by `wrap`.
#[inline]
fn wrap_overflow<S>(overflow: Overflow<S>, wrap: fn(S) -> X86Pmi) -> Overflow<X86Pmi> {
    Overflow { counters: overflow.counters, claim: overflow.claim, status: wrap(overflow.status) }
}

impl PmuBackend for X86Backend {
    type Description = X86Pmu;
    type Cpu = X86Cpu;
    type Counter = X86Counter;
    type Config = X86Config;
    type PmiStatus = X86Pmi;

    fn discover<H: Hardware>(hw: &H) -> Option<X86Pmu> {
        if CpuSignature::read(&hw.cpuid()).is_amd() {
            AmdBackend::discover(hw).map(X86Pmu::Amd)
        } else {
            IntelBackend::discover(hw).map(X86Pmu::Intel)
        }
    }

    fn new<H: Hardware>(cpus: &[Option<X86Pmu>], hw: &H) -> Self {
        if CpuSignature::read(&hw.cpuid()).is_amd() {
            let cpus: alloc::vec::Vec<Option<AmdPmu>> = cpus
                .iter()
                .map(|d| match d {
                    Some(X86Pmu::Amd(pmu)) => Some(*pmu),
                    _ => None,
                })
                .collect();
            X86Backend::Amd(AmdBackend::new(&cpus, hw))
        } else {
            let cpus: alloc::vec::Vec<Option<IntelPmu>> = cpus
                .iter()
                .map(|d| match d {
                    Some(X86Pmu::Intel(pmu)) => Some(*pmu),
                    _ => None,
                })
                .collect();
            X86Backend::Intel(IntelBackend::new(&cpus, hw))
        }
    }

    fn classes(&self) -> &[HardwareClass] {
        match self {
            X86Backend::Intel(b) => b.classes(),
            X86Backend::Amd(b) => b.classes(),
        }
    }

    fn cpu(&self, description: Option<X86Pmu>) -> X86Cpu {
        match self {
            X86Backend::Intel(b) => X86Cpu::Intel(b.cpu(match description {
                Some(X86Pmu::Intel(pmu)) => Some(pmu),
                _ => None,
            })),
            X86Backend::Amd(b) => X86Cpu::Amd(b.cpu(match description {
                Some(X86Pmu::Amd(pmu)) => Some(pmu),
                _ => None,
            })),
        }
    }

    fn row_counter(&self, cpu: &X86Cpu, class: Class, index: u32) -> Option<X86Counter> {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => {
                b.row_counter(c, class, index).map(X86Counter::Intel)
            }
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => {
                b.row_counter(c, class, index).map(X86Counter::Amd)
            }
            _ => None,
        }
    }

    #[inline]
    fn counter_mask(counter: X86Counter) -> CounterMask {
        match counter {
            X86Counter::Intel(c) => IntelBackend::counter_mask(c),
            X86Counter::Amd(c) => AmdBackend::counter_mask(c),
        }
    }

    fn cpu_type(&self) -> u32 {
        match self {
            X86Backend::Intel(b) => b.cpu_type(),
            X86Backend::Amd(b) => b.cpu_type(),
        }
    }

    fn cpuid_string(&self) -> CpuIdString {
        match self {
            X86Backend::Intel(b) => b.cpuid_string(),
            X86Backend::Amd(b) => b.cpuid_string(),
        }
    }

    fn init_cpu<H: Hardware>(&self, hw: &H, cpu: &X86Cpu) {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => b.init_cpu(hw, c),
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => b.init_cpu(hw, c),
            _ => {}
        }
    }

    fn fini_cpu<H: Hardware>(&self, hw: &H, cpu: &X86Cpu) {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => b.fini_cpu(hw, c),
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => b.fini_cpu(hw, c),
            _ => {}
        }
    }

    fn configure(
        &self,
        class: Class,
        rows: u32,
        request: &AllocateRequest<'_>,
    ) -> Result<(X86Config, Range<u32>), Errno> {
        match self {
            X86Backend::Intel(b) => {
                b.configure(class, rows, request).map(|(c, r)| (X86Config::Intel(c), r))
            }
            X86Backend::Amd(b) => {
                b.configure(class, rows, request).map(|(c, r)| (X86Config::Amd(c), r))
            }
        }
    }

    #[inline]
    fn armed(config: X86Config) -> X86Config {
        match config {
            X86Config::Intel(c) => X86Config::Intel(IntelBackend::armed(c)),
            X86Config::Amd(c) => X86Config::Amd(AmdBackend::armed(c)),
        }
    }

    fn max_period(&self, config: X86Config, width_mask: u64) -> u64 {
        match (self, config) {
            (X86Backend::Intel(b), X86Config::Intel(c)) => b.max_period(c, width_mask),
            (X86Backend::Amd(b), X86Config::Amd(c)) => b.max_period(c, width_mask),
            _ => (width_mask >> 1) + 1,
        }
    }

    fn rdpmc_index(config: X86Config, index: u32) -> Option<u32> {
        match config {
            X86Config::Intel(c) => IntelBackend::rdpmc_index(c, index),
            X86Config::Amd(c) => AmdBackend::rdpmc_index(c, index),
        }
    }

    fn raw_event(config: X86Config) -> RawEvent {
        match config {
            X86Config::Intel(c) => IntelBackend::raw_event(c),
            X86Config::Amd(c) => AmdBackend::raw_event(c),
        }
    }

    #[inline]
    fn write_counter<H: Hardware>(&self, hw: &H, counter: X86Counter, value: u64) {
        match (self, counter) {
            (X86Backend::Intel(b), X86Counter::Intel(c)) => b.write_counter(hw, c, value),
            (X86Backend::Amd(b), X86Counter::Amd(c)) => b.write_counter(hw, c, value),
            _ => {}
        }
    }

    #[inline]
    fn program<H: Hardware>(
        &self,
        hw: &H,
        cpu: &X86Cpu,
        counter: X86Counter,
        armed: X86Config,
    ) -> CounterMask {
        match (self, cpu, counter, armed) {
            (
                X86Backend::Intel(b),
                X86Cpu::Intel(cpu),
                X86Counter::Intel(counter),
                X86Config::Intel(armed),
            ) => b.program(hw, cpu, counter, armed),
            (
                X86Backend::Amd(b),
                X86Cpu::Amd(cpu),
                X86Counter::Amd(counter),
                X86Config::Amd(armed),
            ) => b.program(hw, cpu, counter, armed),
            _ => CounterMask::EMPTY,
        }
    }

    #[inline]
    fn start<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counters: CounterMask) {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => b.start(hw, c, counters),
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => b.start(hw, c, counters),
            _ => {}
        }
    }

    #[inline]
    fn stop<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counters: CounterMask) {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => b.stop(hw, c, counters),
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => b.stop(hw, c, counters),
            _ => {}
        }
    }

    #[inline]
    fn unprogram<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counter: X86Counter) {
        match (self, cpu, counter) {
            (X86Backend::Intel(b), X86Cpu::Intel(cpu), X86Counter::Intel(c)) => {
                b.unprogram(hw, cpu, c)
            }
            (X86Backend::Amd(b), X86Cpu::Amd(cpu), X86Counter::Amd(c)) => b.unprogram(hw, cpu, c),
            _ => {}
        }
    }

    #[inline]
    fn flush<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counters: CounterMask) {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => b.flush(hw, c, counters),
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => b.flush(hw, c, counters),
            _ => {}
        }
    }

    #[inline]
    fn read<H: Hardware>(&self, hw: &H, counter: X86Counter) -> u64 {
        match (self, counter) {
            (X86Backend::Intel(b), X86Counter::Intel(c)) => b.read(hw, c),
            (X86Backend::Amd(b), X86Counter::Amd(c)) => b.read(hw, c),
            _ => 0,
        }
    }

    #[inline]
    fn pmi_begin<H: Hardware>(&self, hw: &H, cpu: &X86Cpu) -> Option<Overflow<X86Pmi>> {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => {
                b.pmi_begin(hw, c).map(|o| wrap_overflow(o, X86Pmi::Intel))
            }
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => {
                b.pmi_begin(hw, c).map(|o| wrap_overflow(o, X86Pmi::Amd))
            }
            _ => None,
        }
    }

    #[inline]
    fn pmi_acknowledge<H: Hardware>(
        &self,
        hw: &H,
        cpu: &X86Cpu,
        status: &mut X86Pmi,
    ) -> CounterMask {
        match (self, cpu, status) {
            (X86Backend::Intel(b), X86Cpu::Intel(c), X86Pmi::Intel(s)) => {
                b.pmi_acknowledge(hw, c, s)
            }
            (X86Backend::Amd(b), X86Cpu::Amd(c), X86Pmi::Amd(s)) => b.pmi_acknowledge(hw, c, s),
            _ => CounterMask::EMPTY,
        }
    }

    #[inline]
    fn pmi_end<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, status: X86Pmi) {
        match (self, cpu, status) {
            (X86Backend::Intel(b), X86Cpu::Intel(c), X86Pmi::Intel(s)) => b.pmi_end(hw, c, s),
            (X86Backend::Amd(b), X86Cpu::Amd(c), X86Pmi::Amd(s)) => b.pmi_end(hw, c, s),
            _ => {}
        }
    }

    #[inline]
    fn pmi_exit<H: Hardware>(&self, hw: &H, cpu: &X86Cpu) {
        match (self, cpu) {
            (X86Backend::Intel(b), X86Cpu::Intel(c)) => b.pmi_exit(hw, c),
            (X86Backend::Amd(b), X86Cpu::Amd(c)) => b.pmi_exit(hw, c),
            _ => {}
        }
    }
}
