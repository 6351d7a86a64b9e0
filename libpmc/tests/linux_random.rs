//! Random sequences of pmc(3) operations on the Linux host, with random (often bad) arguments:
//! no panic, every failure an errno the operation documents (with the Linux host's own: EPERM
//! when perf refuses at PMCSTART), and once everything is released every row is free again.
#![cfg(target_os = "linux")]

use hwpmc::abi::{Op, PmcOpPmcAllocate};
use hwpmc_sim::machine::SplitMix64;
use pmc::api;
use pmc::{Mode, PmcFlags, PmcSpec};

/// The errnos each operation may fail with here.
fn documented(op: Op) -> &'static [i32] {
    use libc::*;
    const EDOOFUS: i32 = pmc::error::EDOOFUS;
    match op {
        Op::PmcAllocate => &[EFAULT, EINVAL, ENXIO, EPERM, EOPNOTSUPP],
        Op::PmcAttach => &[EFAULT, EINVAL, ESRCH, EPERM, EEXIST, EBUSY],
        Op::PmcDetach => &[EFAULT, EINVAL, ESRCH],
        Op::PmcStart => &[EFAULT, EINVAL, ESRCH, EDOOFUS, ENXIO, EBUSY, EPERM, ENOMEM],
        Op::PmcStop => &[EFAULT, EINVAL, ESRCH, ENXIO],
        Op::PmcRw => &[EFAULT, EINVAL, ESRCH, EBUSY, ENXIO],
        Op::PmcSetCount => &[EFAULT, EINVAL, ESRCH, EBUSY],
        Op::PmcGetMsr => &[EFAULT, EINVAL, ESRCH, ENOSYS],
        Op::PmcRelease | Op::GetCaps => &[EFAULT, EINVAL, ESRCH],
        Op::ConfigureLog => &[EFAULT, EINVAL, EBUSY, EBADF],
        Op::WriteLog => &[EFAULT, EINVAL, ENOMEM],
        Op::FlushLog | Op::CloseLog => &[EINVAL, EIO, ENOSPC],
        _ => &[EFAULT, EINVAL],
    }
}

struct World {
    ids: Vec<u32>,
    /// A process of this test's own to attach to.
    child: i32,
    log: std::fs::File,
    read_only: std::fs::File,
}

impl World {
    fn id(&self, rng: &mut SplitMix64) -> u32 {
        if !self.ids.is_empty() && rng.chance(85) {
            self.ids[rng.below(self.ids.len() as u64) as usize]
        } else {
            rng.next() as u32
        }
    }

    fn pid(&self, rng: &mut SplitMix64) -> i32 {
        rng.pick(&[0, 0, self.child, self.child, std::process::id() as i32, -1, 0x7fff_fff0])
    }

    fn allocate(&mut self, rng: &mut SplitMix64) -> pmc::Result<()> {
        let event = rng.pick(&["page-faults", "task-clock", "cpu-clock", "context-switches"]);
        let mode = rng.pick(&[
            Mode::ThreadCounting,
            Mode::ThreadCounting,
            Mode::ThreadSampling,
            Mode::SystemCounting,
            Mode::SystemSampling,
        ]);
        let mut spec = PmcSpec::new(event).mode(mode).rate(rng.pick(&[1, 10, 1000, 1_000_000]));
        if mode.is_system() {
            spec = spec.cpu(rng.below(3) as u32);
        }
        if rng.chance(40) {
            let flag = rng.pick(&[
                PmcFlags::CALLCHAIN,
                PmcFlags::DESCENDANTS,
                PmcFlags::LOG_PROCEXIT,
                PmcFlags::LOG_PROCCSW,
                PmcFlags::USERCALLCHAIN,
            ]);
            spec = spec.flags(flag);
        }
        let mut request: PmcOpPmcAllocate = spec.request()?;
        if rng.chance(20) {
            // Garbage in one field.
            match rng.below(5) {
                0 => request.pm_class = rng.below(20) as u32,
                1 => request.pm_mode = rng.below(8) as u32,
                2 => request.pm_flags = rng.next() as u32,
                3 => request.pm_caps = rng.next() as u32,
                _ => request.pm_ev = rng.next() as u32,
            }
        }
        api::call(Op::PmcAllocate, &mut request)?;
        self.ids.push(request.pm_pmcid);
        Ok(())
    }

    fn step(&mut self, rng: &mut SplitMix64) -> (Op, pmc::Result<()>) {
        use std::os::fd::AsRawFd;
        let op = rng.pick(&[
            Op::PmcAllocate,
            Op::PmcAllocate,
            Op::PmcAttach,
            Op::PmcDetach,
            Op::PmcStart,
            Op::PmcStart,
            Op::PmcStop,
            Op::PmcRw,
            Op::PmcSetCount,
            Op::PmcGetMsr,
            Op::PmcRelease,
            Op::GetCaps,
            Op::ConfigureLog,
            Op::WriteLog,
            Op::FlushLog,
            Op::CloseLog,
        ]);
        if rng.chance(5) {
            // An argument buffer too short for the operation's struct.
            let mut short = [0u8; 2];
            return (op, pmc::host::with_host(|h| h.syscall(op, &mut short)));
        }
        let result = match op {
            Op::PmcAllocate => self.allocate(rng),
            Op::PmcAttach => api::attach(self.id(rng), self.pid(rng)),
            Op::PmcDetach => api::detach(self.id(rng), self.pid(rng)),
            Op::PmcStart => api::start(self.id(rng)),
            Op::PmcStop => api::stop(self.id(rng)),
            Op::PmcRw => {
                let flags = rng.pick(&[
                    PmcFlags::OLDVALUE,
                    PmcFlags::NEWVALUE,
                    PmcFlags::OLDVALUE | PmcFlags::NEWVALUE,
                    PmcFlags::CALLCHAIN,
                ]);
                api::rw(self.id(rng), flags, rng.next()).map(drop)
            }
            Op::PmcSetCount => api::set_count(self.id(rng), rng.pick(&[0, 1, 1000, u64::MAX])),
            Op::PmcGetMsr => api::get_msr(self.id(rng)).map(drop),
            Op::PmcRelease => api::release(self.id(rng)),
            Op::GetCaps => api::capabilities(self.id(rng)).map(drop),
            Op::ConfigureLog => {
                let fd = rng.pick(&[
                    self.log.as_raw_fd(),
                    self.log.as_raw_fd(),
                    self.read_only.as_raw_fd(),
                    -1,
                    9999,
                ]);
                api::configure_log(fd)
            }
            Op::WriteLog => api::write_log(rng.next() as u32),
            Op::FlushLog => api::flush_log(),
            _ => api::close_log(),
        };
        (op, result)
    }
}

#[test]
fn random_operations_never_panic_and_leave_every_row_free() {
    let dir = std::env::temp_dir();
    let log_path = dir.join(format!("libpmc-random-{}.log", std::process::id()));
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let mut world = World {
        ids: Vec::new(),
        child: child.id() as i32,
        log: std::fs::File::create(&log_path).unwrap(),
        read_only: std::fs::File::open("/proc/self/stat").unwrap(),
    };
    let mut started = 0;
    for seed in [1u64, 2, 3] {
        let mut rng = SplitMix64(seed);
        for _ in 0..300 {
            let (op, result) = world.step(&mut rng);
            started += usize::from(op == Op::PmcStart && result.is_ok());
            if let Err(e) = result {
                assert!(documented(op).contains(&e.errno), "{op:?} failed with {e}");
            }
        }
        // Everything released: every row free, and the log decodes.
        for id in std::mem::take(&mut world.ids) {
            let _ = api::release(id);
        }
        let _ = api::close_log();
        for cpu in 0..api::cpu_info().unwrap().pm_ncpu {
            for (row, info) in api::pmc_info(cpu).unwrap().iter().enumerate() {
                assert_eq!(info.pm_ownerpid, -1, "seed {seed}: cpu {cpu} row {row} still held");
            }
        }
        let bytes = std::fs::read(&log_path).unwrap();
        for entry in pmclog::Records::new(&bytes) {
            entry.unwrap_or_else(|e| panic!("seed {seed}: the log does not decode: {e}"));
        }
    }
    assert!(started >= 20, "only {started} PMCs started: the sequences test little");
    let rows: Vec<_> = (0..16).map(|_| PmcSpec::new("page-faults").allocate().unwrap()).collect();
    drop(rows);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&log_path);
}
