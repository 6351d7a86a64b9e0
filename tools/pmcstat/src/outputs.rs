//! The files pmcstat writes (`-o`, `-O`, `-G`, `-F`, `-M`, `--folded`, `--flamegraph`,
//! `--pprof`, the gmon files), opened so that a run that fails never harms what the user
//! named: pmcstat removes or truncates only a file it created itself in this run.
//!
//! - A device, FIFO or socket is written in place: opened for writing only, never created,
//!   truncated or removed (`-o` to a private null device, `-G` to a terminal).
//! - A regular file, new or existing, is written as a temporary file in the same directory
//!   (created with `O_EXCL` under a random name) and renamed onto the path by
//!   [`Output::commit`]: a report when it is written in full, a log or counts file when the
//!   measurement starts. Until then the path keeps what it held, and a failure (a mistyped
//!   event, a command not found, a full disk) removes the temporary file only. An existing
//!   file is replaced as FreeBSD's pmcstat replaces it, keeping its permission bits (and its
//!   owner, when pmcstat may set it); a symbolic link stays a link, and the file it points to is
//!   replaced. A new file is created with the usual `0666` less the umask, and never replaces a
//!   file that appeared at the path during the run.

use std::fs::{File, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// An output file being written.
#[derive(Debug)]
pub struct Output {
    state: State,
}

#[derive(Debug)]
enum State {
    /// A device, FIFO or socket, written in place.
    InPlace(File),
    /// A temporary file that becomes `path` at [`Output::commit`]; `replaces` says whether a
    /// file was there when the run began (else nothing may be there at the commit).
    Pending { temp: NamedTempFile, path: PathBuf, replaces: bool },
}

impl Output {
    /// Opens `path` for writing, as the module says; nothing is created at `path` itself
    /// before [`Output::commit`].
    pub fn create(path: &Path) -> io::Result<Output> {
        let state = match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => return Err(io::Error::from_raw_os_error(libc::EISDIR)),
            // Without O_TRUNC and O_CREAT: a device is written, never truncated or made.
            Ok(meta) if !meta.is_file() => State::InPlace(File::options().write(true).open(path)?),
            Ok(meta) => {
                // The file a symbolic link points to is replaced; the link stays.
                let path = std::fs::canonicalize(path)?;
                let temp = temporary_beside(&path)?;
                let file = temp.as_file();
                // Root replacing a user's file gives it back to the user; others cannot, and
                // the file is then theirs, as a file they write anew would be.
                let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
                // The permission bits only: a report is never made set-id.
                file.set_permissions(Permissions::from_mode(meta.mode() & 0o777))?;
                State::Pending { temp, path, replaces: true }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(path).is_ok() {
                    // A link to nothing: where it points was not named by the user.
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "a symbolic link to a file that does not exist",
                    ));
                }
                let temp = temporary_beside(path)?;
                State::Pending { temp, path: path.to_path_buf(), replaces: false }
            }
            Err(e) => return Err(e),
        };
        Ok(Output { state })
    }

    /// The file to write (a temporary file until [`Output::commit`]).
    pub fn file(&self) -> &File {
        match &self.state {
            State::InPlace(file) => file,
            State::Pending { temp, .. } => temp.as_file(),
        }
    }

    /// Puts the written file in place of the path it was opened for (nothing to do for a
    /// device) and returns it, still open.
    pub fn commit(self) -> io::Result<File> {
        match self.state {
            State::InPlace(file) => Ok(file),
            State::Pending { temp, path, replaces } => {
                let persisted =
                    if replaces { temp.persist(&path) } else { temp.persist_noclobber(&path) };
                persisted.map_err(|e| e.error)
            }
        }
    }
}

/// A new temporary file, readable and writable, in the directory of `path`.
fn temporary_beside(path: &Path) -> io::Result<NamedTempFile> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(".pmcstat-");
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)
}

/// Writes the file `path` with `write`: all of it, or (on any error) nothing at all — an
/// existing file keeps its content, a new one is not created.
pub fn write_whole(
    path: &Path,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<()> {
    let output = Output::create(path)?;
    let mut buffered = io::BufWriter::new(output.file());
    write(&mut buffered)?;
    io::Write::flush(&mut buffered)?;
    drop(buffered);
    output.commit().map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_file_appears_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.txt");
        let output = Output::create(&path).unwrap();
        output.file().write_all(b"data").unwrap();
        assert!(!path.exists());
        output.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"data");
        assert_eq!(names_in(dir.path()), ["new.txt"]);
    }

    #[test]
    fn an_uncommitted_output_leaves_an_existing_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.txt");
        std::fs::write(&path, b"precious").unwrap();
        let output = Output::create(&path).unwrap();
        output.file().write_all(b"half").unwrap();
        drop(output);
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
        assert_eq!(names_in(dir.path()), ["old.txt"]);
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_link_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        std::fs::write(&target, b"old").unwrap();
        std::fs::set_permissions(&target, Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_whole(&link, |out| out.write_all(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o640);
    }

    #[test]
    fn a_failed_write_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("never.txt");
        let failed = write_whole(&path, |_| Err(io::Error::other("no")));
        assert!(failed.is_err());
        assert_eq!(names_in(dir.path()), Vec::<String>::new());
    }
}
