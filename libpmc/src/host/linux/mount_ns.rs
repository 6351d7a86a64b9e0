//! Finding, from this process's mount namespace, the file a process in another one mapped (a
//! container, `unshare -m` with a bind mount): the path perf and `/proc/PID/maps` give is the
//! path as that process sees it, which here may name nothing, or another file.
//!
//! A mapped file is known by its device and inode (perf's MMAP2 records, `/proc/PID/maps`). A
//! path is used only if the file there is that one: the same path here, else the path here of
//! the same file found through the two namespaces' mount tables (a bind mount's source, a
//! container's root mounted on the host), else — while the process lives — its mapped file
//! itself (`/proc/PID/map_files/START-END`) or its view (`/proc/PID/root/PATH`). A process in
//! this namespace, or one already gone, keeps its path as it is.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use hwpmc::Pid;

/// Which file a mapping maps: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl FileId {
    /// The identity of the file at `path` (following symbolic and `/proc` links).
    fn of(path: &[u8]) -> Option<FileId> {
        let meta = std::fs::metadata(os_path(path)).ok()?;
        Some(FileId { dev: meta.dev(), ino: meta.ino() })
    }
}

/// Where the host finds a mapped file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    /// The path the log names: one readers here can open after the run, or, when the file is
    /// nowhere in this namespace, `/proc/PID/root/PATH` (which names the process's own file
    /// while it lives, and nothing after, so a reader reports the image as missing instead of
    /// reading a file of the same name).
    pub(crate) log: Vec<u8>,
    /// The path to open the file by now (for its unwind sections), if it can be.
    pub(crate) open: Option<Vec<u8>>,
}

impl Located {
    fn unchanged(path: &[u8]) -> Located {
        Located { log: path.to_vec(), open: Some(path.to_vec()) }
    }
}

/// Where the host finds the file process `pid` mapped at the addresses `mapped` (if known)
/// under `path`, with identity `id` (if known: else the file the process sees at `path` now).
pub(crate) fn locate(
    pid: Pid,
    path: &[u8],
    id: Option<FileId>,
    mapped: Option<std::ops::Range<u64>>,
) -> Located {
    if !path.starts_with(b"/") || in_own_namespace(pid) != Some(false) {
        return Located::unchanged(path);
    }
    let inside = [format!("/proc/{pid}/root").as_bytes(), path].concat();
    let Some(id) = id.or_else(|| FileId::of(&inside)) else {
        return Located { log: inside, open: None };
    };
    let is_it = |candidate: &[u8]| FileId::of(candidate) == Some(id);
    let mut here = std::iter::once(path.to_vec()).chain(paths_here(pid, path));
    if let Some(found) = here.find(|p| is_it(p)) {
        return Located::unchanged(&found);
    }
    let mapped =
        mapped.map(|m| format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end).into_bytes());
    let open = mapped.into_iter().chain([inside.clone()]).find(|p| is_it(p));
    Located { log: inside, open }
}

/// The path of process `pid`'s executable as this namespace finds it (empty if unknown).
pub(crate) fn exe_path(pid: Pid) -> Vec<u8> {
    let path = crate::host::unix_process::exe_path(pid);
    if path.is_empty() {
        return path;
    }
    locate(pid, &path, FileId::of(format!("/proc/{pid}/exe").as_bytes()), None).log
}

/// Whether process `pid` is in this process's mount namespace; `None` if that cannot be told
/// (it has ended).
fn in_own_namespace(pid: Pid) -> Option<bool> {
    let ns = |who: &str| FileId::of(format!("/proc/{who}/ns/mnt").as_bytes());
    Some(ns(&pid.to_string())? == ns("self")?)
}

/// The paths in this namespace where the file at `path` in process `pid`'s namespace may be:
/// the mount holding it there, and each mount of the same filesystem here that shows the same
/// directory (identity is checked by the caller).
fn paths_here(pid: Pid, path: &[u8]) -> Vec<Vec<u8>> {
    let Ok(theirs) = std::fs::read(format!("/proc/{pid}/mountinfo")) else { return Vec::new() };
    let Ok(ours) = std::fs::read("/proc/self/mountinfo") else { return Vec::new() };
    translate(&theirs, &ours, path)
}

/// [`paths_here`] from the two namespaces' `mountinfo` files: `theirs` (where `path` is) and
/// `ours`.
fn translate(theirs: &[u8], ours: &[u8], path: &[u8]) -> Vec<Vec<u8>> {
    let Some(holder) =
        mounts(theirs).filter(|m| beneath(path, &m.mount_point).is_some()).max_by_key(|m| {
            // Deeper mount points cover shallower ones; later ones cover earlier ones.
            m.mount_point.len()
        })
    else {
        return Vec::new();
    };
    let rest = beneath(path, &holder.mount_point).unwrap_or_default();
    let in_filesystem = join(&holder.root, rest);
    mounts(ours)
        .filter(|m| m.device == holder.device)
        .filter_map(|m| Some(join(&m.mount_point, beneath(&in_filesystem, &m.root)?)))
        .collect()
}

/// One line of a `mountinfo` file: `ID PARENT MAJ:MIN ROOT MOUNT_POINT ...`.
struct Mount {
    device: Vec<u8>,
    /// The directory of the filesystem the mount shows.
    root: Vec<u8>,
    mount_point: Vec<u8>,
}

/// The mounts of a `mountinfo` file, in its order.
fn mounts(text: &[u8]) -> impl Iterator<Item = Mount> + '_ {
    text.split(|&b| b == b'\n').filter_map(|line| {
        let mut fields = line.split(|&b| b == b' ').skip(2);
        let device = fields.next()?.to_vec();
        let root = unescape(fields.next()?);
        let mount_point = unescape(fields.next()?);
        Some(Mount { device, root, mount_point })
    })
}

/// What follows directory `dir` in `path` (`""` for `dir` itself), if `path` is beneath it.
fn beneath<'p>(path: &'p [u8], dir: &[u8]) -> Option<&'p [u8]> {
    if dir == b"/" {
        return Some(path.strip_prefix(b"/").unwrap_or(path));
    }
    match path.strip_prefix(dir)? {
        [] => Some(&[]),
        [b'/', rest @ ..] => Some(rest),
        _ => None,
    }
}

/// `dir/rest`.
fn join(dir: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = dir.to_vec();
    if !rest.is_empty() {
        if !out.ends_with(b"/") {
            out.push(b'/');
        }
        out.extend_from_slice(rest);
    }
    out
}

/// A `mountinfo` field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut at = 0;
    while at < field.len() {
        let octal =
            field.get(at + 1..at + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (field[at], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |v, b| v.wrapping_mul(8).wrapping_add(b - b'0')));
                at += 4;
            }
            (b, _) => {
                out.push(b);
                at += 1;
            }
        }
    }
    out
}

fn os_path(path: &[u8]) -> &Path {
    Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_in_this_namespace_keeps_its_paths() {
        let me = std::process::id() as Pid;
        let located = locate(me, b"/no/such/file", None, None);
        assert_eq!(located, Located::unchanged(b"/no/such/file"));
        assert_eq!(locate(me, b"[vdso]", None, None), Located::unchanged(b"[vdso]"));
    }

    #[test]
    fn mountinfo_lines_give_device_root_and_mount_point_unescaped() {
        let text = b"36 35 98:0 /mnt\\0401 /mnt2 rw,noatime master:1 - ext3 /dev/root rw\n";
        let mount = mounts(text).next().unwrap();
        assert_eq!((&mount.device[..], &mount.root[..]), (&b"98:0"[..], &b"/mnt 1"[..]));
        assert_eq!(mount.mount_point, b"/mnt2");
        assert_eq!(mounts(b"junk").count(), 0);
    }

    #[test]
    fn a_bind_mounts_file_is_found_at_its_source_and_a_containers_at_its_root_here() {
        let ours = b"22 1 8:1 / / rw - ext4 /dev/vda rw\n\
                     30 22 0:40 / /tmp rw - tmpfs tmpfs rw\n\
                     90 22 0:77 / /var/lib/c/merged rw - overlay overlay rw\n";
        // `mount --bind /tmp/d/real /tmp/d/inside` in the process's namespace.
        let theirs = b"22 1 8:1 / / rw - ext4 /dev/vda rw\n\
                       30 22 0:40 / /tmp rw - tmpfs tmpfs rw\n\
                       31 30 0:40 /d/real /tmp/d/inside rw - tmpfs tmpfs rw\n";
        assert_eq!(translate(theirs, ours, b"/tmp/d/inside/prog"), [b"/tmp/d/real/prog"]);
        assert_eq!(translate(theirs, ours, b"/usr/bin/sh"), [b"/usr/bin/sh"]);
        // A file bind-mounted over another.
        let over = b"30 22 0:40 / /tmp rw - tmpfs tmpfs rw\n\
                     32 30 0:40 /d/real/prog /tmp/d/x/prog rw - tmpfs tmpfs rw\n";
        assert_eq!(translate(over, ours, b"/tmp/d/x/prog"), [b"/tmp/d/real/prog"]);
        // A container whose root the host mounts.
        let container = b"500 400 0:77 / / rw - overlay overlay rw\n";
        assert_eq!(translate(container, ours, b"/app/prog"), [b"/var/lib/c/merged/app/prog"]);
        // A filesystem only the process's namespace mounts.
        let private = b"600 22 0:99 / /tmp/d/p rw - tmpfs none rw\n";
        assert!(translate(private, ours, b"/tmp/d/p/prog").is_empty());
    }

    #[test]
    fn paths_beneath_a_directory_are_split_at_a_component() {
        assert_eq!(beneath(b"/a/b/c", b"/a"), Some(&b"b/c"[..]));
        assert_eq!(beneath(b"/a/b", b"/"), Some(&b"a/b"[..]));
        assert_eq!(beneath(b"/ab/c", b"/a"), None);
        assert_eq!(beneath(b"/a", b"/a"), Some(&b""[..]));
        assert_eq!(join(b"/", b"x/y"), b"/x/y");
        assert_eq!(join(b"/m", b""), b"/m");
    }
}
