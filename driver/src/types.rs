//! The leaf types every layer names: processes, threads, CPUs and user addresses.

/// A process id (`pid_t`).
pub type Pid = i32;
/// A thread id (`lwpid_t`).
pub type Tid = i32;
/// A CPU number, from 0 to [`Kernel::cpu_count`](crate::Kernel::cpu_count) − 1.
pub type Cpu = u32;

/// An address in the calling process's address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserPtr(pub u64);

impl UserPtr {
    /// The null pointer.
    pub const NULL: UserPtr = UserPtr(0);

    /// The address `offset` bytes further on, or `None` on overflow.
    pub fn offset(self, offset: usize) -> Option<UserPtr> {
        self.0.checked_add(offset as u64).map(UserPtr)
    }
}
