//! The Linux kernel's symbol table, `/proc/kallsyms`, read through a per-boot cache.
//!
//! The kernel builds `/proc/kallsyms` afresh at every read, which costs ~50 ms of system time
//! for its ~120 000 lines — more than the whole analysis of a typical log. The text symbols are
//! the same until the machine reboots or loads or unloads a module, so the first read keeps them
//! (in kallsyms format, text symbols only) in `$XDG_CACHE_HOME/hwpmc-rs` (else
//! `~/.cache/hwpmc-rs`) under a name made of the boot id and a digest of `/proc/modules`, as perf
//! keeps its own copy in `~/.debug`. A cache that cannot be written is simply not used.

use std::hash::{Hash, Hasher};

use super::image::SORTED_KALLSYMS_HEADER;
use super::image_file;
use std::path::{Path, PathBuf};

/// The largest kernel symbol table read: a kernel with every module loaded has a few hundred
/// thousand symbols (about 20 MiB of text).
const MAX_SYMBOL_TABLE: u64 = 256 << 20;

/// The text of the kernel symbol table at `path`: from the cache when `path` is this machine's
/// `/proc/kallsyms` and the cache is current, else read (and cached when it is
/// `/proc/kallsyms`).
pub(crate) fn read(path: &Path) -> Option<String> {
    if path != Path::new(pmc::host::KERNEL_SYMBOLS) {
        return image_file::read_text(path, MAX_SYMBOL_TABLE);
    }
    let cached = cache_file();
    if let Some(text) = cached.as_ref().and_then(|c| image_file::read_text(c, MAX_SYMBOL_TABLE)) {
        if text.starts_with(SORTED_KALLSYMS_HEADER) {
            return Some(text);
        }
    }
    let text = image_file::read_text(path, MAX_SYMBOL_TABLE)?;
    let sorted = text_symbols(&text);
    // Only a table with addresses is worth keeping (a kernel hiding them shows zeros).
    if sorted.is_empty() {
        return Some(text);
    }
    if let Some(cache) = cached {
        let _ = write_atomically(&cache, &sorted);
    }
    Some(sorted)
}

/// The text symbols of `table` that have an address, sorted by address, one per address, in
/// the form the analysis searches in place ([`SORTED_KALLSYMS_HEADER`]); empty if there is
/// none.
fn text_symbols(table: &str) -> String {
    let mut symbols: Vec<(u64, &str)> = table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let address = u64::from_str_radix(fields.next()?, 16).ok()?;
            let text = matches!(fields.next()?, "t" | "T" | "w" | "W");
            let name = fields.next()?;
            (text && address != 0).then_some((address, name))
        })
        .collect();
    if symbols.is_empty() {
        return String::new();
    }
    symbols.sort_by_key(|&(address, _)| address);
    symbols.dedup_by_key(|&mut (address, _)| address);
    let mut out = String::from(SORTED_KALLSYMS_HEADER);
    for (address, name) in symbols {
        out.push_str(&format!("{address:016x} {name}\n"));
    }
    out
}

/// Where this boot's table is cached, if a cache directory is known.
fn cache_file() -> Option<PathBuf> {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let modules = std::fs::read_to_string("/proc/modules").unwrap_or_default();
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    // Module names and load addresses, not their use counts (which change all the time).
    for line in modules.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        (fields.first(), fields.get(5)).hash(&mut digest);
    }
    let dir = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
    };
    let name = format!("kallsyms-{}-{:016x}", boot_id.trim(), digest.finish());
    Some(dir.join("hwpmc-rs").join(name))
}

/// Writes `text` to `path` through a temporary file, so a reader never sees half a table.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(".kallsyms-{}", std::process::id()));
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_only_text_symbols_with_addresses() {
        let table = "ffffffff81000000 T _stext\nffffffff81001000 D data\n\
                     0000000000000000 t hidden\nffffffffc0001000 t mod_fn\t[ext4]\n";
        assert_eq!(
            text_symbols(table),
            format!("{SORTED_KALLSYMS_HEADER}ffffffff81000000 _stext\nffffffffc0001000 mod_fn\n")
        );
    }

    #[test]
    fn another_table_is_read_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kallsyms");
        std::fs::write(&file, "ffffffff81000000 T _stext\n").unwrap();
        assert_eq!(read(&file).as_deref(), Some("ffffffff81000000 T _stext\n"));
    }
}
