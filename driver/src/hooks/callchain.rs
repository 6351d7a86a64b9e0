//! Callchains: kernel frames walked in the interrupt, user frames walked later, when the
//! interrupted thread returns to user mode (a pending sample never blocks the ring).

use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Tid, TrapFrame};
use crate::machine::{FrameWriter, SampleRing, UserStack};
use crate::machine::{PerCpu, Slot};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Records a sample of `slot`'s PMC, which records callchains: a kernel-mode
    /// sample gets its kernel callchain here, walked through the saved frame pointers of the
    /// interrupted stack; a user-mode sample waits in the pending table for its thread to
    /// return to user mode, where its user stack can be read. With PMC_F_USERCALLCHAIN too, a
    /// kernel-mode sample of a user thread waits there with its kernel callchain, and the user
    /// stack is appended at the return to user mode; its flags stay those of a kernel-mode
    /// sample (no PMC_CC_F_USERSPACE), as FreeBSD's UR ring leaves them. A sample the pending
    /// table has no room for goes to `ring` with what the interrupt has.
    #[inline(always)]
    pub(super) fn record_callchain(
        &self,
        state: &PerCpu,
        ring: &SampleRing,
        slot: &Slot,
        frame: &TrapFrame,
    ) {
        if !frame.user {
            self.record_kernel_callchain(state, ring, slot, frame);
            return;
        }
        let header = Self::sample_header(state, slot, frame, self.hw.read_tsc());
        if !state.pending.hold_user_sample(header, frame.pc, frame.fp)
            && !ring.push_pc(header, frame.pc)
        {
            Self::count_lost_sample(state, slot);
        }
    }

    /// [`Self::record_callchain`] of a kernel-mode sample.
    // Out of line: the common samples (the PC alone, or held for the user stack) stay short.
    #[inline(never)]
    fn record_kernel_callchain(
        &self,
        state: &PerCpu,
        ring: &SampleRing,
        slot: &Slot,
        frame: &TrapFrame,
    ) {
        let cpu = state.cpu;
        let header = Self::sample_header(state, slot, frame, self.hw.read_tsc());
        // Only a thread of a user process (pid 0 is the kernel's own) returns to user mode.
        let wants_user_stack = state.current_pid() > 0
            && state.current_tid() >= 0
            && slot.sample_flags().appends_user_stack();
        if wants_user_stack
            && state.pending.hold_kernel_sample(header, |frames| {
                self.walk_kernel_stack(cpu, frame, frames);
            })
        {
            return;
        }
        if !ring.push(header, |frames| self.walk_kernel_stack(cpu, frame, frames)) {
            Self::count_lost_sample(state, slot);
        }
    }

    /// Return-to-user hook: thread `tid` of process `pid` is about to return to user mode on
    /// `cpu` (after an interrupt, a system call or a context switch; called on `cpu`, in the
    /// thread's context, where the process's memory can be read with faults handled), to the
    /// user context `frame` (its user PC and frame pointer). Completes the thread's waiting
    /// samples: a user-mode sample gets its user callchain, walked from the frame pointer it
    /// was taken with; a kernel-mode sample of a PMC_F_USERCALLCHAIN PMC gets `frame`'s PC and
    /// user callchain after its kernel frames. Walks go through the frame pointers with
    /// fault-tolerant reads: an unreadable stack ends the callchain there. Cheap when nothing
    /// waits, so a kernel may call it on every return to user mode.
    pub fn user_return(&self, cpu: Cpu, pid: Pid, tid: Tid, frame: &TrapFrame) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        let _ = pid;
        if !state.pending.any_pending() {
            return;
        }
        let depth = self.tunables.callchain_depth as usize;
        // The CPU's preallocated frame buffer (lock order: scratch, then book, as in `tick`).
        let mut frames = state.scratch.lock(&self.kernel);
        state.pending.take_thread(tid, |sample| {
            frames.clear();
            frames.extend(sample.frames().take(depth));
            let fp = match sample.user_stack {
                UserStack::FromSample { fp } => Some(fp),
                UserStack::FromReturn if frame.user && frames.len() < depth => {
                    frames.push(frame.pc);
                    Some(frame.fp)
                }
                UserStack::FromReturn => None,
            };
            if let Some(fp) = fp {
                self.walk_user_stack(fp, depth, &mut frames);
            }
            self.log_sample(cpu, sample.header, &frames);
        });
    }

    /// Interrupt path: writes the kernel callchain of the interruption `frame` on `cpu`: its
    /// PC, then the return addresses of the frame records from `frame.fp` outwards (at `fp` the
    /// caller's frame pointer, at `fp + 8` the return address), up to `callchain_depth` frames
    /// in all. Each record is read with [`Kernel::read_kernel_stack`], so nothing outside the
    /// interrupted thread's kernel stack is touched; the walk ends at a record outside it, a
    /// misaligned frame pointer, a zero return address (the outermost frame), or a caller's
    /// frame pointer that is not above its callee's (stacks grow down). No lock, no allocation.
    // Out of line: the common sample (the PC alone) stays short.
    #[inline(never)]
    fn walk_kernel_stack(&self, cpu: Cpu, frame: &TrapFrame, frames: &mut FrameWriter<'_>) {
        let depth = self.tunables.callchain_depth as usize;
        if !frames.push(frame.pc) {
            return;
        }
        let mut fp = frame.fp;
        while frames.len() < depth && fp % 8 == 0 {
            let mut record = [0u8; 16];
            if !self.kernel.read_kernel_stack(cpu, fp, &mut record) {
                break;
            }
            let (caller_fp, return_address) = frame_record(&record);
            if return_address == 0 || !frames.push(return_address) || caller_fp <= fp {
                break;
            }
            fp = caller_fp;
        }
    }

    /// Appends the return addresses of the frame records from `fp` outwards, up to `depth`
    /// frames in all, reading user memory with `copy_in` (a fault ends the walk).
    fn walk_user_stack(&self, mut fp: u64, depth: usize, frames: &mut alloc::vec::Vec<u64>) {
        while frames.len() < depth && fp != 0 {
            let mut record = [0u8; 16];
            if self.kernel.copy_in(crate::kernel::UserPtr(fp), &mut record).is_err() {
                break;
            }
            let (caller_fp, return_address) = frame_record(&record);
            if return_address == 0 {
                break;
            }
            frames.push(return_address);
            // Stacks grow down: a caller's frame is above its callee's, or the chain is bad.
            if caller_fp <= fp {
                break;
            }
            fp = caller_fp;
        }
    }
}

/// An x86-64 frame record: the caller's frame pointer, then the return address.
#[inline]
fn frame_record(record: &[u8; 16]) -> (u64, u64) {
    let words = u128::from_le_bytes(*record);
    (words as u64, (words >> 64) as u64)
}
