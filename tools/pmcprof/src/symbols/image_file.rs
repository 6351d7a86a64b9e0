//! Opening a file a log names, for symbols, lines or unwind tables, without letting the file
//! decide how much is read.
//!
//! A log is input like any other: it may name `/proc/self/pagemap` (a "regular file" of size 0
//! that reads as 256 GiB of data), `/proc/kcore` (a regular file the size of the address space),
//! a FIFO or a device. Only a regular file with a plausible, non-zero size is opened, and no read
//! goes past the size it had when it was opened.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The largest image or debug file read: larger than any real executable or debug file, and
/// smaller than the procfs files that claim to be regular files of the address space's size.
pub(crate) const MAX_IMAGE_BYTES: u64 = 16 << 30;

/// `path` opened for reading, with its size, if it is a regular file of 1 to
/// [`MAX_IMAGE_BYTES`] bytes. It is opened non-blocking (a FIFO put there since it was looked at
/// cannot block) and checked after opening (what was opened is what is read). The error names
/// the path and the reason.
pub(crate) fn open(path: &Path) -> Result<(File, u64), String> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(pid) = pid_of_own_namespace_root(path) {
        return Err(format!(
            "{}: a file of a process in another mount namespace, which has ended (process {pid} \
             is now one of this namespace), so not read",
            path.display()
        ));
    }
    let failed = |e: std::io::Error| format!("{}: {e}", path.display());
    let file =
        File::options().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file, so not read for symbols", path.display()));
    }
    match meta.len() {
        // procfs and sysfs files say 0 whatever they hold.
        0 => Err(format!("{}: empty (or a /proc or /sys file), so not read", path.display())),
        len if len > MAX_IMAGE_BYTES => Err(format!(
            "{}: {len} bytes, more than any image ({MAX_IMAGE_BYTES} at most), so not read",
            path.display()
        )),
        len => Ok((file, len)),
    }
}

/// The process of a `/proc/PID/root/…` path — the form the Linux host logs a file of a process
/// in another mount namespace by — if that process is in this one: the recorded process has
/// ended and its number names another, whose root would give the host's file of the same name.
fn pid_of_own_namespace_root(path: &Path) -> Option<String> {
    let rest = path.as_os_str().as_encoded_bytes().strip_prefix(b"/proc/")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || !rest[digits..].starts_with(b"/root/") {
        return None;
    }
    let pid = std::str::from_utf8(&rest[..digits]).ok()?;
    let ns = |who: &str| {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(format!("/proc/{who}/ns/mnt")).ok()?;
        Some((meta.dev(), meta.ino()))
    };
    (ns(pid)? == ns("self")?).then(|| pid.to_owned())
}

/// The first `len` bytes of `file` (its size when opened): a file that grew since is not
/// followed, and a shorter read is what the file had.
pub(crate) fn read_all(file: File, len: u64) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut data)?;
    Ok(data)
}

/// A text file (a kernel symbol table) of at most `limit` bytes, read whole; a longer file is
/// refused rather than cut (a cut symbol table names addresses wrongly). Files of size 0 are
/// read too, up to `limit`, since `/proc/kallsyms` is one.
pub(crate) fn read_text(path: &Path, limit: u64) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = File::options().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(limit.saturating_add(1)).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= limit).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_proc_root_path_of_a_process_of_this_namespace_is_not_opened() {
        let exe = std::env::current_exe().unwrap();
        let path = format!("/proc/{}/root{}", std::process::id(), exe.display());
        let err = open(Path::new(&path)).unwrap_err();
        assert!(err.contains("another mount namespace, which has ended"), "{err}");
        assert!(open(&exe).is_ok());
    }

    #[test]
    fn a_procfs_file_of_size_zero_is_not_opened() {
        let err = open(Path::new("/proc/self/pagemap")).unwrap_err();
        assert!(err.contains("empty (or a /proc or /sys file)"), "{err}");
    }

    #[test]
    fn an_empty_regular_file_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        std::fs::write(&path, b"").unwrap();
        assert!(open(&path).unwrap_err().contains("empty"));
    }

    #[test]
    fn a_regular_file_larger_than_any_image_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        let file = File::create(&path).unwrap();
        file.set_len(MAX_IMAGE_BYTES + 1).unwrap();
        let err = open(&path).unwrap_err();
        assert!(err.contains("more than any image"), "{err}");
    }

    #[test]
    fn a_directory_and_a_fifo_are_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        assert!(open(dir.path()).unwrap_err().contains("not a regular file"));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(open(&fifo).unwrap_err().contains("not a regular file"));
    }

    #[test]
    fn reads_stop_at_the_size_the_file_had_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grows");
        std::fs::write(&path, b"0123456789").unwrap();
        let (file, len) = open(&path).unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"more").unwrap();
        assert_eq!(read_all(file, len).unwrap(), b"0123456789");
    }

    #[test]
    fn a_text_file_over_the_limit_is_refused_and_procfs_text_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("table");
        std::fs::write(&path, "0123456789").unwrap();
        assert_eq!(read_text(&path, 10).as_deref(), Some("0123456789"));
        assert_eq!(read_text(&path, 9), None);
        let procfs = read_text(Path::new("/proc/self/status"), 1 << 20).unwrap();
        assert!(procfs.starts_with("Name:"), "{procfs}");
    }
}
