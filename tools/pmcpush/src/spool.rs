//! A bounded spool directory: windows the queue could not keep, or whose attempts all failed,
//! wait there (on disk, not in memory) until the backend is back.
//!
//! The spool touches only files it created itself: each is created with `O_EXCL` under a name
//! unique to this spool (process ID and start time), opened again with `O_NOFOLLOW`, and
//! removed only while it is still the file that was created (same device and inode). It never
//! follows a symlink, never lists the directory to pick up files, and never removes the
//! directory. At shutdown the windows still in it are removed (and counted as dropped at
//! shutdown): a spool bounds an outage within a run, and leaves nothing behind.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use prost::Message;

use crate::window::{AttributeValue, Resource, SampleType, Window, WindowMeta, unix_nanos};

/// Where and how much to spool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolConfig {
    /// The directory (created, mode 0700, if absent; refused if it is a symlink).
    pub dir: PathBuf,
    /// Windows the spool holds at most.
    pub max_windows: usize,
    /// Bytes the spool's files take at most.
    pub max_bytes: u64,
}

/// Why the spool could not take or give a window.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpoolError {
    /// The directory is a symlink or not a directory.
    #[error("{0}: not a directory (a symlink is not followed)")]
    NotADirectory(PathBuf),
    /// The spool holds its most windows or bytes.
    #[error("the spool is full")]
    Full,
    /// Creating, writing or reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// A spool directory in use.
#[derive(Debug)]
pub struct Spool {
    config: SpoolConfig,
    /// `pmcpush-PID-START-`: no other spool, in this process or another, makes these names.
    prefix: String,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    bytes: u64,
    /// The files this spool created and has not removed, oldest first.
    files: BTreeMap<u64, Created>,
}

/// What identifies a file as the one this spool created.
#[derive(Clone, Copy, Debug)]
struct Created {
    dev: u64,
    ino: u64,
    size: u64,
}

impl Spool {
    /// Opens (creating if absent) the spool directory.
    pub fn open(config: &SpoolConfig) -> Result<Spool, SpoolError> {
        let dir = &config.dir;
        match fs::symlink_metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(SpoolError::NotADirectory(dir.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use std::os::unix::fs::DirBuilderExt;
                fs::DirBuilder::new()
                    .mode(0o700)
                    .create(dir)
                    .map_err(|source| SpoolError::Io { path: dir.clone(), source })?;
            }
            Err(source) => return Err(SpoolError::Io { path: dir.clone(), source }),
        }
        let started = unix_nanos(std::time::SystemTime::now());
        Ok(Spool {
            config: config.clone(),
            prefix: format!("pmcpush-{}-{started}-", std::process::id()),
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is updated only after the file operation it records, so a panic leaves
        // it describing files that exist.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn path(&self, id: u64) -> PathBuf {
        self.config.dir.join(format!("{}{id:016}.window", self.prefix))
    }

    /// Windows in the spool now.
    pub fn len(&self) -> usize {
        self.lock().files.len()
    }

    /// Whether the spool is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes `window` to a new file.
    pub fn put(&self, window: &Window) -> Result<(), SpoolError> {
        let bytes = encode(window);
        let size = bytes.len() as u64;
        let mut state = self.lock();
        if state.files.len() >= self.config.max_windows
            || state.bytes + size > self.config.max_bytes
        {
            return Err(SpoolError::Full);
        }
        let id = state.next_id;
        state.next_id += 1;
        let path = self.path(id);
        let io = |source| SpoolError::Io { path: path.clone(), source };
        // O_EXCL: a file (or symlink) already at this name is never opened, let alone written.
        let mut file =
            OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let created = Created { dev: meta.dev(), ino: meta.ino(), size };
        // No fsync: the spool lives as long as the pusher (nothing is read back after a
        // crash), and a window may be spooled from the sampler's thread, which must not wait.
        if let Err(e) = file.write_all(&bytes) {
            drop(file);
            // The file is the one just created: remove the partial window.
            self.remove_created(id, created);
            return Err(io(e));
        }
        state.bytes += size;
        state.files.insert(id, created);
        Ok(())
    }

    /// The oldest window in the spool that can still be read, with its id (to
    /// [`remove`](Spool::remove) it once sent). A file that is no longer the one created
    /// (replaced, or unreadable) is forgotten, not removed.
    pub fn oldest(&self) -> Option<(u64, Window)> {
        loop {
            let (id, created) = {
                let state = self.lock();
                let (&id, &created) = state.files.iter().next()?;
                (id, created)
            };
            match self.read(id, created) {
                Some(window) => return Some((id, window)),
                None => self.forget(id),
            }
        }
    }

    fn read(&self, id: u64, created: Created) -> Option<Window> {
        let mut file: File = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.path(id))
            .ok()?;
        let meta = file.metadata().ok()?;
        if (meta.dev(), meta.ino()) != (created.dev, created.ino) {
            return None;
        }
        let mut bytes = Vec::with_capacity(usize::try_from(created.size).ok()?);
        Read::by_ref(&mut file).take(created.size + 1).read_to_end(&mut bytes).ok()?;
        decode(&bytes)
    }

    /// Removes a window that was sent (or refused for good).
    pub fn remove(&self, id: u64) {
        let created = self.lock().files.get(&id).copied();
        if let Some(created) = created {
            self.remove_created(id, created);
            self.forget(id);
        }
    }

    /// Removes every window still in the spool; how many there were.
    pub fn clear(&self) -> u64 {
        let files = std::mem::take(&mut self.lock().files);
        self.lock().bytes = 0;
        for (&id, &created) in &files {
            self.remove_created(id, created);
        }
        files.len() as u64
    }

    fn forget(&self, id: u64) {
        let mut state = self.lock();
        if let Some(created) = state.files.remove(&id) {
            state.bytes -= created.size;
        }
    }

    /// Removes the file `id` only while it is the one this spool created.
    fn remove_created(&self, id: u64, created: Created) {
        let path = self.path(id);
        if let Ok(meta) = fs::symlink_metadata(&path)
            && meta.is_file()
            && (meta.dev(), meta.ino()) == (created.dev, created.ino)
        {
            // Failing to remove leaves a file the spool no longer counts; nothing else to do.
            let _ = fs::remove_file(&path);
        }
    }
}

/// A window as the spool stores it.
#[derive(Clone, PartialEq, Message)]
struct SpooledWindow {
    #[prost(uint64, tag = "1")]
    start_unix_nanos: u64,
    #[prost(uint64, tag = "2")]
    end_unix_nanos: u64,
    #[prost(string, tag = "3")]
    event: String,
    #[prost(string, tag = "4")]
    sample_kind: String,
    #[prost(string, tag = "5")]
    sample_unit: String,
    #[prost(uint64, optional, tag = "6")]
    period: Option<u64>,
    #[prost(message, repeated, tag = "7")]
    resource: Vec<SpooledAttribute>,
    #[prost(message, repeated, tag = "8")]
    labels: Vec<SpooledAttribute>,
    #[prost(bytes = "vec", tag = "9")]
    profile: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct SpooledAttribute {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, optional, tag = "2")]
    string_value: Option<String>,
    #[prost(int64, optional, tag = "3")]
    int_value: Option<i64>,
}

fn encode(window: &Window) -> Vec<u8> {
    let meta = &window.meta;
    let attribute = |key: &str, value: &AttributeValue| SpooledAttribute {
        key: key.to_owned(),
        string_value: match value {
            AttributeValue::String(s) => Some(s.clone()),
            AttributeValue::Int(_) => None,
        },
        int_value: match value {
            AttributeValue::Int(n) => Some(*n),
            AttributeValue::String(_) => None,
        },
    };
    SpooledWindow {
        start_unix_nanos: meta.start_unix_nanos(),
        end_unix_nanos: meta.end_unix_nanos(),
        event: meta.event.clone(),
        sample_kind: meta.sample_type.kind.clone(),
        sample_unit: meta.sample_type.unit.clone(),
        period: meta.period,
        resource: meta.resource.attributes().iter().map(|(k, v)| attribute(k, v)).collect(),
        labels: meta
            .labels
            .iter()
            .map(|(k, v)| attribute(k, &AttributeValue::String(v.clone())))
            .collect(),
        profile: window.profile.to_vec(),
    }
    .encode_to_vec()
}

fn decode(bytes: &[u8]) -> Option<Window> {
    let s = SpooledWindow::decode(bytes).ok()?;
    let value = |a: &SpooledAttribute| match (&a.string_value, a.int_value) {
        (Some(s), _) => AttributeValue::String(s.clone()),
        (None, Some(n)) => AttributeValue::Int(n),
        (None, None) => AttributeValue::String(String::new()),
    };
    let mut resource = Resource::new("");
    for a in &s.resource {
        resource.set(&a.key, value(a));
    }
    let meta = WindowMeta {
        start: UNIX_EPOCH + Duration::from_nanos(s.start_unix_nanos),
        end: UNIX_EPOCH + Duration::from_nanos(s.end_unix_nanos),
        event: s.event,
        sample_type: SampleType { kind: s.sample_kind, unit: s.sample_unit },
        period: s.period,
        resource,
        labels: s.labels.iter().map(|a| (a.key.clone(), value(a).to_string())).collect(),
    };
    Some(Window::new(s.profile, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(n: u8) -> Window {
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut meta = WindowMeta::new(start, start + Duration::from_secs(10), "cycles", "svc");
        meta.resource.set("process.pid", 42);
        meta.labels.push(("env".into(), "prod".into()));
        meta.period = Some(1000);
        Window::new(vec![n; 100], meta)
    }

    fn config(dir: &std::path::Path, max_windows: usize) -> SpoolConfig {
        SpoolConfig { dir: dir.join("spool"), max_windows, max_bytes: 1 << 20 }
    }

    #[test]
    fn windows_come_back_whole_and_oldest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let spool = Spool::open(&config(tmp.path(), 4)).unwrap();
        spool.put(&window(1)).unwrap();
        spool.put(&window(2)).unwrap();
        let (id, back) = spool.oldest().unwrap();
        assert_eq!(back, window(1));
        spool.remove(id);
        assert_eq!(spool.oldest().unwrap().1, window(2));
        assert_eq!(spool.clear(), 1);
        assert_eq!(fs::read_dir(tmp.path().join("spool")).unwrap().count(), 0);
    }

    #[test]
    fn a_full_spool_refuses() {
        let tmp = tempfile::tempdir().unwrap();
        let spool = Spool::open(&config(tmp.path(), 1)).unwrap();
        spool.put(&window(1)).unwrap();
        assert!(matches!(spool.put(&window(2)), Err(SpoolError::Full)));
    }

    #[test]
    fn a_symlinked_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("real")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("spool")).unwrap();
        assert!(matches!(Spool::open(&config(tmp.path(), 1)), Err(SpoolError::NotADirectory(_))));
    }

    #[test]
    fn a_replaced_file_is_neither_read_nor_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let spool = Spool::open(&config(tmp.path(), 4)).unwrap();
        spool.put(&window(1)).unwrap();
        let path = spool.path(0);
        // Someone replaces the spooled file with a symlink to a file of theirs.
        let theirs = tmp.path().join("theirs");
        fs::write(&theirs, b"keep me").unwrap();
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&theirs, &path).unwrap();
        assert!(spool.oldest().is_none());
        assert_eq!(spool.clear(), 0);
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&theirs).unwrap(), b"keep me");
        // A file of someone else's, at a name the spool would make next, is never opened.
        fs::write(spool.path(1), b"not mine").unwrap();
        assert!(matches!(spool.put(&window(2)), Err(SpoolError::Io { .. })));
        assert_eq!(fs::read(spool.path(1)).unwrap(), b"not mine");
    }
}
