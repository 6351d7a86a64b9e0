//! Finding an image's separate debug file, where distributions put the symbols they strip from
//! their binaries (Debian's `*-dbg` / `*-dbgsym` packages, Fedora's `debuginfo`), in the order
//! GDB searches (`gdb/doc`, "Separate Debug Files"):
//!
//! 1. by build ID: `DEBUG_DIR/.build-id/ab/cdef….debug`;
//! 2. by `.gnu_debuglink` name, with its CRC-32 checked: next to the image, in a `.debug`
//!    directory beside it, and under `DEBUG_DIR` followed by the image's directory;
//! 3. by build ID in the debuginfod client's cache (`$DEBUGINFOD_CACHE_PATH`, else
//!    `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`), where
//!    `debuginfod-find` and GDB leave what they download: `BUILDID/debuginfo`.
//!
//! `DEBUG_DIR` is `/usr/lib/debug` (under `-r fsroot` when given). Only regular files are
//! candidates, so a name in a log can never make the analysis open a FIFO or a device.

use std::path::{Path, PathBuf};

/// Where to look for separate debug files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DebugSearch {
    /// The global debug directory; `None` for the system's `/usr/lib/debug` (under `fsroot`).
    pub debug_dir: Option<PathBuf>,
    /// The debuginfod client cache; `None` for the one the environment names.
    pub debuginfod_cache: Option<PathBuf>,
}

/// The system's global debug directory.
pub const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// What an image says about its debug file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DebugLinks {
    /// The `NT_GNU_BUILD_ID` note.
    pub(crate) build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: the debug file's name and the CRC-32 of its contents.
    pub(crate) debuglink: Option<(Vec<u8>, u32)>,
}

impl DebugSearch {
    /// The candidates for the debug file of the image at `image_path` (a path on this machine,
    /// already under `fsroot`), in search order; only existing regular files.
    pub(crate) fn candidates(
        &self,
        image_path: &Path,
        fsroot: Option<&Path>,
        links: &DebugLinks,
    ) -> Vec<(PathBuf, Check)> {
        let debug_dir = self.debug_dir.clone().unwrap_or_else(|| match fsroot {
            Some(root) => root.join(SYSTEM_DEBUG_DIR.trim_start_matches('/')),
            None => PathBuf::from(SYSTEM_DEBUG_DIR),
        });
        let mut found = Vec::new();
        let build_id = links.build_id.as_deref().filter(|id| id.len() >= 2).map(hex);
        if let Some(id) = &build_id {
            let path =
                debug_dir.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
            found.push((path, Check::BuildId));
        }
        if let Some((name, crc)) = &links.debuglink {
            // A debuglink is a file name, never a path: one with a '/' could reach anywhere.
            if let Some(name) = std::str::from_utf8(name).ok().filter(|n| plain_file_name(n)) {
                let dir = image_path.parent().unwrap_or(Path::new("/"));
                found.push((dir.join(name), Check::Crc(*crc)));
                found.push((dir.join(".debug").join(name), Check::Crc(*crc)));
                // DEBUG_DIR + the image's directory as it is named on its own machine.
                let own_dir = match fsroot {
                    Some(root) => dir.strip_prefix(root).unwrap_or(dir),
                    None => dir,
                };
                let relative = own_dir.strip_prefix("/").unwrap_or(own_dir);
                found.push((debug_dir.join(relative).join(name), Check::Crc(*crc)));
            }
        }
        if let (Some(id), Some(cache)) = (&build_id, self.debuginfod_cache()) {
            found.push((cache.join(id).join("debuginfo"), Check::BuildId));
        }
        found.retain(|(path, _)| path.as_path() != image_path && is_regular_file(path));
        found
    }

    fn debuginfod_cache(&self) -> Option<PathBuf> {
        if let Some(cache) = &self.debuginfod_cache {
            return Some(cache.clone());
        }
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        var("DEBUGINFOD_CACHE_PATH")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("debuginfod_client")))
            .or_else(|| var("HOME").map(|d| d.join(".cache/debuginfod_client")))
    }
}

/// How a candidate is confirmed to belong to the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Its build ID equals the image's.
    BuildId,
    /// The CRC-32 of its contents equals the debuglink's.
    Crc(u32),
}

/// Whether `path` is a regular file (following symbolic links, as `.build-id` entries are).
pub(crate) fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

fn plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/')
}

/// `bytes` in lower-case hex, as build IDs are written.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The CRC-32 `.gnu_debuglink` uses (the IEEE polynomial, as zlib's `crc32`).
pub(crate) fn debuglink_crc(data: &[u8]) -> u32 {
    let mut hasher = flate2::Crc::new();
    hasher.update(data);
    hasher.sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
    }

    #[test]
    fn candidates_follow_gdbs_order_and_exist() {
        let root = tempfile::tempdir().unwrap();
        let debug = root.path().join("debug");
        let cache = root.path().join("cache");
        let image = root.path().join("bin/prog");
        touch(&image);
        let links = DebugLinks {
            build_id: Some(vec![0xab, 0xcd, 0xef]),
            debuglink: Some((b"prog.debug".to_vec(), 7)),
        };
        let search =
            DebugSearch { debug_dir: Some(debug.clone()), debuginfod_cache: Some(cache.clone()) };
        assert!(search.candidates(&image, None, &links).is_empty(), "nothing exists yet");
        let expected = [
            (debug.join(".build-id/ab/cdef.debug"), Check::BuildId),
            (root.path().join("bin/prog.debug"), Check::Crc(7)),
            (root.path().join("bin/.debug/prog.debug"), Check::Crc(7)),
            (
                debug.join(root.path().strip_prefix("/").unwrap()).join("bin/prog.debug"),
                Check::Crc(7),
            ),
            (cache.join("abcdef/debuginfo"), Check::BuildId),
        ];
        for (path, _) in &expected {
            touch(path);
        }
        assert_eq!(search.candidates(&image, None, &links), expected);
    }

    #[test]
    fn a_debuglink_with_a_path_or_a_non_regular_file_is_never_a_candidate() {
        let root = tempfile::tempdir().unwrap();
        let image = root.path().join("prog");
        touch(&image);
        touch(&root.path().join("secret"));
        std::fs::create_dir(root.path().join("dir.debug")).unwrap();
        let search = DebugSearch {
            debug_dir: Some(root.path().join("none")),
            debuginfod_cache: Some(root.path().join("none")),
        };
        for name in ["../secret", "/etc/passwd", "..", "dir.debug", ""] {
            let links = DebugLinks { build_id: None, debuglink: Some((name.into(), 0)) };
            assert!(search.candidates(&image, None, &links).is_empty(), "{name}");
        }
    }

    #[test]
    fn the_debuglink_crc_is_zlibs_crc32() {
        assert_eq!(debuglink_crc(b"123456789"), 0xcbf4_3926);
    }
}
