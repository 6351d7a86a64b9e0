//! The vocabulary the generated tables (`generated/mod.rs`) are written in: a CPU vendor, a
//! hybrid part's core type, a mapfile row and a table's source text. A leaf: the tables, the
//! model matching ([`super::model`]) and the table parsing ([`super::table`]) all use it.

use std::ops::RangeInclusive;

/// A CPU vendor with event tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD`.
    Amd,
}

impl Vendor {
    /// The CPUID vendor string.
    pub const fn id(self) -> &'static str {
        match self {
            Vendor::Intel => "GenuineIntel",
            Vendor::Amd => "AuthenticAMD",
        }
    }
}

/// The core type of a hybrid part's table (CPUID.1AH:EAX: core type in bits 31:24, native
/// model id in bits 23:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hybrid {
    /// 0x20 Atom (E-core), 0x40 Core (P-core).
    pub core_type: u8,
    /// The native model id.
    pub native_model: u32,
}

impl Hybrid {
    /// `Core`, `Atom` or the number, for listings.
    pub fn core_type_name(&self) -> String {
        match self.core_type {
            0x20 => "Atom".into(),
            0x40 => "Core".into(),
            other => format!("core type {other:#x}"),
        }
    }
}

/// A mapfile line as a model range (generated).
#[derive(Debug)]
pub(crate) struct ModelRow {
    pub(crate) vendor: Vendor,
    pub(crate) family: u32,
    pub(crate) models: RangeInclusive<u32>,
    /// Bit s set: stepping s matches.
    pub(crate) steppings: u16,
    pub(crate) table: usize,
    pub(crate) hybrid: Option<Hybrid>,
}

/// A generated table: its name, vendor and the text of its `.tsv` file.
#[derive(Debug)]
pub(crate) struct TableSource {
    /// The table name (`skylake`, `alderlake_gracemont`, `amdzen4`).
    pub(crate) name: &'static str,
    /// Whose events these are.
    pub(crate) vendor: Vendor,
    /// One line per event (see `generated/mod.rs`).
    pub(crate) events: &'static str,
}
