//! The driver's locks: `spin` mutexes taken inside a critical section the host kernel provides
//! ([`Kernel::enter_critical_section`]), so that a kernel can disable preemption and interrupts
//! while one is held. They are taken in thread context only (system calls, the fork, exec and
//! exit hooks, the drain); the interrupt path takes none.

use crate::kernel::{CriticalSection, Kernel};

/// A value behind one of the driver's locks.
#[derive(Debug, Default)]
pub(crate) struct Lock<T> {
    inner: spin::Mutex<T>,
}

/// A held [`Lock`]: the lock is released, then the kernel's critical section left, when it is
/// dropped (fields drop in declaration order).
pub(crate) struct Guard<'a, T, K: Kernel + ?Sized> {
    guard: spin::MutexGuard<'a, T>,
    _section: Section<'a, K>,
}

/// Leaves the kernel's critical section when dropped.
struct Section<'a, K: Kernel + ?Sized> {
    kernel: &'a K,
    section: CriticalSection,
}

impl<K: Kernel + ?Sized> Drop for Section<'_, K> {
    fn drop(&mut self) {
        self.kernel.exit_critical_section(self.section);
    }
}

impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock { inner: spin::Mutex::new(value) }
    }

    /// Enters `kernel`'s critical section, then takes the lock.
    #[inline]
    pub(crate) fn lock<'a, K: Kernel + ?Sized>(&'a self, kernel: &'a K) -> Guard<'a, T, K> {
        let section = Section { kernel, section: kernel.enter_critical_section() };
        Guard { guard: self.inner.lock(), _section: section }
    }
}

impl<T, K: Kernel + ?Sized> core::ops::Deref for Guard<'_, T, K> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T, K: Kernel + ?Sized> core::ops::DerefMut for Guard<'_, T, K> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}
