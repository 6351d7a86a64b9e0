//! The x86 backend the driver runs: Intel's or AMD's, chosen at load from the CPU's vendor
//! (FreeBSD's `pmc_md_initialize` dispatch). Each method delegates to the chosen backend, by
//! the backend's vendor flag or by the vendor of the counter or configuration it is
//! given (which only the chosen backend hands out).

use alloc::vec::Vec;
use core::ops::Range;

use super::amd::discovery::AmdPmu;
use super::amd::{AmdBackend, AmdConfig, AmdCounter, AmdCpu, AmdImage};
use super::cpuid::CpuSignature;
use super::intel::discovery::IntelPmu;
use super::intel::{IntelBackend, IntelConfig, IntelCounter, IntelCpu, IntelImage};
use crate::abi::Class;
use crate::backend::{
    AllocateRequest, CounterMask, CpuIdString, HardwareClass, OtherCoreType, PmuBackend, RawEvent,
};
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::refusal::Refusal;

/// The machine's PMU backend: both vendors' backends, the one of the CPU's vendor driving the
/// PMU and the other with no PMU. A struct rather than an enum, so that the hot paths test one
/// flag of the backend and no tag of the per-CPU state.
#[derive(Debug)]
pub struct X86Backend {
    /// Whether the CPU is AMD's (or Hygon's).
    amd: bool,
    intel: IntelBackend,
    amd_backend: AmdBackend,
}

/// What discovery found on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum X86Pmu {
    /// An Intel PMU.
    Intel(IntelPmu),
    /// AMD core counters.
    Amd(AmdPmu),
}

/// One CPU's state: both vendors' (the other vendor's describes no PMU and is never used).
#[derive(Debug)]
pub struct X86Cpu {
    intel: IntelCpu,
    amd: AmdCpu,
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

/// Control registers imaged for loading, of the vendor of the counters added (an enum, so that
/// an image, which loading a single PMC makes too, holds one vendor's registers only).
#[derive(Debug, Clone)]
pub enum X86Image {
    /// Intel's registers (and the empty image).
    Intel(IntelImage),
    /// AMD's.
    Amd(AmdImage),
}

impl Default for X86Image {
    fn default() -> Self {
        X86Image::Intel(IntelImage::default())
    }
}

impl PmuBackend for X86Backend {
    type Description = X86Pmu;
    type Cpu = X86Cpu;
    type Counter = X86Counter;
    type Config = X86Config;
    type Image = X86Image;

    fn discover<H: Hardware>(hw: &H) -> Option<X86Pmu> {
        if CpuSignature::read(&hw.cpuid()).is_amd() {
            AmdBackend::discover(hw).map(X86Pmu::Amd)
        } else {
            IntelBackend::discover(hw).map(X86Pmu::Intel)
        }
    }

    fn new<H: Hardware>(cpus: &[Option<X86Pmu>], hw: &H) -> Self {
        let intel: Vec<Option<IntelPmu>> = cpus
            .iter()
            .map(|d| match d {
                Some(X86Pmu::Intel(pmu)) => Some(*pmu),
                _ => None,
            })
            .collect();
        let amd: Vec<Option<AmdPmu>> = cpus
            .iter()
            .map(|d| match d {
                Some(X86Pmu::Amd(pmu)) => Some(*pmu),
                _ => None,
            })
            .collect();
        X86Backend {
            amd: CpuSignature::read(&hw.cpuid()).is_amd(),
            intel: IntelBackend::new(&intel, hw),
            amd_backend: AmdBackend::new(&amd, hw),
        }
    }

    fn classes(&self) -> &[HardwareClass] {
        if self.amd { self.amd_backend.classes() } else { self.intel.classes() }
    }

    fn cpu(&self, description: Option<X86Pmu>) -> X86Cpu {
        let (intel, amd) = match description {
            Some(X86Pmu::Intel(pmu)) => (Some(pmu), None),
            Some(X86Pmu::Amd(pmu)) => (None, Some(pmu)),
            None => (None, None),
        };
        X86Cpu { intel: self.intel.cpu(intel), amd: self.amd_backend.cpu(amd) }
    }

    fn core_type(&self, cpu: &X86Cpu) -> u8 {
        if self.amd {
            self.amd_backend.core_type(&cpu.amd)
        } else {
            self.intel.core_type(&cpu.intel)
        }
    }

    fn stop_keeps_program(&self, cpu: &X86Cpu) -> bool {
        if self.amd {
            self.amd_backend.stop_keeps_program(&cpu.amd)
        } else {
            self.intel.stop_keeps_program(&cpu.intel)
        }
    }

    fn apply_tunables(&mut self, tunables: &crate::kernel::Tunables) {
        self.intel.apply_tunables(tunables);
        self.amd_backend.apply_tunables(tunables);
    }

    fn row_counter(&self, cpu: &X86Cpu, class: Class, index: u32) -> Option<X86Counter> {
        if self.amd {
            self.amd_backend.row_counter(&cpu.amd, class, index).map(X86Counter::Amd)
        } else {
            self.intel.row_counter(&cpu.intel, class, index).map(X86Counter::Intel)
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
        if self.amd { self.amd_backend.cpu_type() } else { self.intel.cpu_type() }
    }

    fn cpuid_string(&self) -> CpuIdString {
        if self.amd { self.amd_backend.cpuid_string() } else { self.intel.cpuid_string() }
    }

    fn init_cpu<H: Hardware>(&self, hw: &H, cpu: &X86Cpu) {
        if self.amd {
            self.amd_backend.init_cpu(hw, &cpu.amd)
        } else {
            self.intel.init_cpu(hw, &cpu.intel)
        }
    }

    fn fini_cpu<H: Hardware>(&self, hw: &H, cpu: &X86Cpu) {
        if self.amd {
            self.amd_backend.fini_cpu(hw, &cpu.amd)
        } else {
            self.intel.fini_cpu(hw, &cpu.intel)
        }
    }

    fn claim<'a>(
        &self,
        cpus: impl Iterator<Item = &'a X86Cpu> + Clone,
        config: X86Config,
    ) -> Result<(), Errno> {
        match config {
            X86Config::Intel(c) => self.intel.claim(cpus.map(|cpu| &cpu.intel), c),
            X86Config::Amd(c) => self.amd_backend.claim(cpus.map(|cpu| &cpu.amd), c),
        }
    }

    fn unclaim<'a>(&self, cpus: impl Iterator<Item = &'a X86Cpu>, config: X86Config) {
        match config {
            X86Config::Intel(c) => self.intel.unclaim(cpus.map(|cpu| &cpu.intel), c),
            X86Config::Amd(c) => self.amd_backend.unclaim(cpus.map(|cpu| &cpu.amd), c),
        }
    }

    fn configure(
        &self,
        class: Class,
        rows: u32,
        request: &AllocateRequest<'_>,
    ) -> Result<(X86Config, Range<u32>), Refusal> {
        if self.amd {
            let (config, rows) = self.amd_backend.configure(class, rows, request)?;
            Ok((X86Config::Amd(config), rows))
        } else {
            let (config, rows) = self.intel.configure(class, rows, request)?;
            Ok((X86Config::Intel(config), rows))
        }
    }

    fn configure_other_core_type(
        &self,
        class: Class,
        request: &AllocateRequest<'_>,
        config: X86Config,
    ) -> Result<Option<OtherCoreType<X86Config>>, Errno> {
        let other = match config {
            X86Config::Amd(config) => self
                .amd_backend
                .configure_other_core_type(class, request, config)?
                .map(|o| OtherCoreType {
                    primary: o.primary,
                    other: o.other,
                    config: X86Config::Amd(o.config),
                }),
            X86Config::Intel(config) => self
                .intel
                .configure_other_core_type(class, request, config)?
                .map(|o| OtherCoreType {
                    primary: o.primary,
                    other: o.other,
                    config: X86Config::Intel(o.config),
                }),
        };
        Ok(other)
    }

    #[inline]
    fn armed(config: X86Config) -> X86Config {
        match config {
            X86Config::Intel(c) => X86Config::Intel(IntelBackend::armed(c)),
            X86Config::Amd(c) => X86Config::Amd(AmdBackend::armed(c)),
        }
    }

    fn max_period(&self, config: X86Config, width_mask: u64) -> u64 {
        match config {
            X86Config::Intel(c) => self.intel.max_period(c, width_mask),
            X86Config::Amd(c) => self.amd_backend.max_period(c, width_mask),
        }
    }

    fn rdpmc_index(config: X86Config, index: u32) -> Option<u32> {
        match config {
            X86Config::Intel(c) => IntelBackend::rdpmc_index(c, index),
            X86Config::Amd(c) => AmdBackend::rdpmc_index(c, index),
        }
    }

    fn host_countable(config: X86Config) -> bool {
        match config {
            X86Config::Intel(c) => IntelBackend::host_countable(c),
            X86Config::Amd(c) => AmdBackend::host_countable(c),
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
        match counter {
            X86Counter::Intel(c) => self.intel.write_counter(hw, c, value),
            X86Counter::Amd(c) => self.amd_backend.write_counter(hw, c, value),
        }
    }

    #[inline]
    fn add_to_image(image: &mut X86Image, counter: X86Counter, armed: X86Config) {
        match (counter, armed, &mut *image) {
            (X86Counter::Intel(counter), X86Config::Intel(armed), X86Image::Intel(image)) => {
                IntelBackend::add_to_image(image, counter, armed);
            }
            (X86Counter::Amd(counter), X86Config::Amd(armed), X86Image::Amd(image)) => {
                AmdBackend::add_to_image(image, counter, armed);
            }
            (X86Counter::Amd(counter), X86Config::Amd(armed), X86Image::Intel(_)) => {
                // The first AMD counter of an (empty) image.
                let mut amd = AmdImage::default();
                AmdBackend::add_to_image(&mut amd, counter, armed);
                *image = X86Image::Amd(amd);
            }
            // A configuration of the other vendor's (never made), or counters of both vendors
            // (no machine has them): nothing to program.
            _ => {}
        }
    }

    #[inline]
    fn program<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, image: &X86Image) -> CounterMask {
        match image {
            X86Image::Intel(image) => self.intel.program(hw, &cpu.intel, image),
            X86Image::Amd(image) => self.amd_backend.program(hw, &cpu.amd, image),
        }
    }

    #[inline]
    fn program_counter<H: Hardware>(
        &self,
        hw: &H,
        cpu: &X86Cpu,
        counter: X86Counter,
        armed: X86Config,
    ) -> CounterMask {
        match (counter, armed) {
            (X86Counter::Intel(counter), X86Config::Intel(armed)) => {
                self.intel.program_counter(hw, &cpu.intel, counter, armed)
            }
            (X86Counter::Amd(counter), X86Config::Amd(armed)) => {
                self.amd_backend.program_counter(hw, &cpu.amd, counter, armed)
            }
            // A configuration of the other vendor's (never made): nothing to program.
            _ => CounterMask::EMPTY,
        }
    }

    #[inline]
    fn program_and_start<H: Hardware>(
        &self,
        hw: &H,
        cpu: &X86Cpu,
        image: &X86Image,
    ) -> CounterMask {
        match image {
            X86Image::Intel(image) => self.intel.program_and_start(hw, &cpu.intel, image),
            X86Image::Amd(image) => self.amd_backend.program_and_start(hw, &cpu.amd, image),
        }
    }

    #[inline]
    fn stop_and_unprogram<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counters: CounterMask) {
        if self.amd {
            self.amd_backend.stop_and_unprogram(hw, &cpu.amd, counters)
        } else {
            self.intel.stop_and_unprogram(hw, &cpu.intel, counters)
        }
    }

    #[inline]
    fn start<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counters: CounterMask) {
        if self.amd {
            self.amd_backend.start(hw, &cpu.amd, counters)
        } else {
            self.intel.start(hw, &cpu.intel, counters)
        }
    }

    #[inline]
    fn stop<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counters: CounterMask) {
        if self.amd {
            self.amd_backend.stop(hw, &cpu.amd, counters)
        } else {
            self.intel.stop(hw, &cpu.intel, counters)
        }
    }

    #[inline]
    fn unprogram<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, counters: CounterMask) {
        if self.amd {
            self.amd_backend.unprogram(hw, &cpu.amd, counters)
        } else {
            self.intel.unprogram(hw, &cpu.intel, counters)
        }
    }

    #[inline]
    fn read<H: Hardware>(&self, hw: &H, counter: X86Counter) -> u64 {
        match counter {
            X86Counter::Intel(c) => self.intel.read(hw, c),
            X86Counter::Amd(c) => self.amd_backend.read(hw, c),
        }
    }

    #[inline]
    fn pmi<H: Hardware>(&self, hw: &H, cpu: &X86Cpu, overflowed: impl FnMut(u32) -> bool) -> bool {
        if self.amd {
            self.amd_backend.pmi(hw, &cpu.amd, overflowed)
        } else {
            self.intel.pmi(hw, &cpu.intel, overflowed)
        }
    }
}
