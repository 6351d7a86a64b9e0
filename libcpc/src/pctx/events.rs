//! What [`Pctx::run`](super::Pctx::run) reports: the callbacks of libpctx, shared by every
//! host's way of running the process (the Linux tracer, the simulator, FreeBSD's polling).

/// A callback of [`PctxEvents`] failed: [`Pctx::run`](super::Pctx::run) stops and fails with `EINVAL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallbackFailed;

/// What [`Pctx::run`](super::Pctx::run) calls; a callback returning `Err` makes `run` fail with `EINVAL`.
pub trait PctxEvents {
    /// The process is about to be measured (before it runs, for a launched one).
    fn init_lwp(&mut self, _pid: i32, _lwp: i32) -> std::result::Result<(), CallbackFailed> {
        Ok(())
    }
    /// Every `msec` milliseconds while it runs.
    fn tick(&mut self, _pid: i32, _lwp: i32) -> std::result::Result<(), CallbackFailed> {
        Ok(())
    }
    /// It has ended (still readable).
    fn fini_lwp(&mut self, _pid: i32, _lwp: i32) -> std::result::Result<(), CallbackFailed> {
        Ok(())
    }
    /// Its exit status (as a shell reports it; 0 for a captured process).
    fn exit(&mut self, _pid: i32, _lwp: i32, _status: i32) {}
    /// LWP `lwp` was created (after its `init_lwp`, before it runs).
    fn lwp_create(&mut self, _pid: i32, _lwp: i32) -> std::result::Result<(), CallbackFailed> {
        Ok(())
    }
    /// LWP `lwp` is exiting (after its `fini_lwp`; the process goes on).
    fn lwp_exit(&mut self, _pid: i32, _lwp: i32) -> std::result::Result<(), CallbackFailed> {
        Ok(())
    }
    /// LWP `lwp` of process `pid` forked process `child` (before the child runs).
    fn fork(&mut self, _pid: i32, _lwp: i32, _child: i32) {}
    /// Process `pid` executed `command` (after `fini_lwp` of its LWPs of the old image, before
    /// `init_lwp` of LWP 1 of the new one). `Err` ends the process's tracking: it runs on,
    /// released (illumos).
    fn exec(
        &mut self,
        _pid: i32,
        _lwp: i32,
        _command: &str,
    ) -> std::result::Result<(), CallbackFailed> {
        Ok(())
    }
}
