//! Random sequences of libcpc operations on the simulator host, with random (often bad)
//! events, attributes, flags, presets, counters and buffers: no panic, every failure an errno
//! libcpc documents, and once the sets are gone no PMC is left allocated. Random `-c` specs
//! never panic the tools' parser.

mod common;

use common::busy_rows;
use cpc::consts::CPC_VER_CURRENT;
use cpc::{Attr, Buf, Cpc, Set};
use pmc::host::{self, HostKind};
use proptest::prelude::*;

const EVENTS: &[&str] = &[
    "PAPI_tot_ins",
    "PAPI_br_ins",
    "PAPI_tot_cyc",
    "instr_retired.any",
    "cpu_clk_unhalted.ref",
    "br_inst_retired.all_branches",
    "0xc0",
    "",
    "-1",
    "12abc",
    "bogus",
];
const ATTRS: &[&str] =
    &["picnum", "umask", "cmask", "edge", "inv", "nouser", "sys", "smpl_nrecs", "bogus", ""];

#[derive(Debug, Clone)]
enum Step {
    NewSet,
    Add { set: usize, event: usize, preset: u64, flags: u32, attrs: Vec<(usize, u64)> },
    BindLwp { set: usize, flags: u32 },
    BindCpu { set: usize, cpu: i32, flags: u32 },
    Unbind { set: usize },
    Sample { set: usize, size: usize },
    Preset { index: i32, preset: u64 },
    Restart,
    Enable,
    Disable,
}

fn step() -> impl Strategy<Value = Step> {
    let small = || prop_oneof![0u64..8, Just(0x100), any::<u64>()];
    let flags = || prop_oneof![0u32..0x20, Just(0x102), Just(0x103), any::<u32>()];
    prop_oneof![
        Just(Step::NewSet),
        (
            0usize..3,
            0..EVENTS.len(),
            small(),
            flags(),
            prop::collection::vec((0..ATTRS.len(), small()), 0..3)
        )
            .prop_map(|(set, event, preset, flags, attrs)| Step::Add {
                set,
                event,
                preset,
                flags,
                attrs
            }),
        (0usize..3, 0u32..3).prop_map(|(set, flags)| Step::BindLwp { set, flags }),
        (0usize..3, -1i32..4, 0u32..2).prop_map(|(set, cpu, flags)| Step::BindCpu {
            set,
            cpu,
            flags
        }),
        (0usize..3).prop_map(|set| Step::Unbind { set }),
        (0usize..3, 0usize..5).prop_map(|(set, size)| Step::Sample { set, size }),
        (-1i32..4, any::<u64>()).prop_map(|(index, preset)| Step::Preset { index, preset }),
        Just(Step::Restart),
        Just(Step::Enable),
        Just(Step::Disable),
    ]
}

/// Runs `step` on `sets`.
fn run(cpc: &Cpc, sets: &mut Vec<Set>, step: &Step) -> cpc::Result<()> {
    let platform = cpc.platform();
    let n = sets.len();
    match step {
        Step::NewSet => {
            sets.push(Set::new());
            Ok(())
        }
        Step::Add { set, event, preset, flags, attrs } => {
            let attrs: Vec<Attr> = attrs.iter().map(|&(a, v)| Attr::new(ATTRS[a], v)).collect();
            sets[set % n].add_request(platform, EVENTS[*event], *preset, *flags, &attrs).map(drop)
        }
        Step::BindLwp { set, flags } => sets[set % n].bind_curlwp(platform, *flags),
        Step::BindCpu { set, cpu, flags } => sets[set % n].bind_cpu(platform, *cpu, *flags),
        Step::Unbind { set } => sets[set % n].unbind(),
        Step::Sample { set, size } => sets[set % n].sample(&mut Buf::new(*size)),
        Step::Preset { index, preset } => cpc::request_preset(*index, *preset),
        Step::Restart => cpc::set_restart(),
        Step::Enable => cpc::enable(),
        Step::Disable => cpc::disable(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_operations_fail_only_with_documented_errno_and_leave_nothing(
        steps in prop::collection::vec(step(), 1..40)
    ) {
        let _ = host::select(HostKind::Sim);
        let cpc = Cpc::open(CPC_VER_CURRENT).expect("cpc_open");
        let mut sets = vec![Set::new()];
        for step in &steps {
            if let Err(e) = run(&cpc, &mut sets, step) {
                let documented = [libc::EINVAL, libc::EAGAIN, libc::ENOTSUP, libc::EACCES];
                prop_assert!(documented.contains(&e.errno), "{step:?}: {e}");
            }
        }
        drop(sets);
        prop_assert_eq!(busy_rows(cpc.platform().ncpu), Vec::new());
    }

    #[test]
    fn any_spec_parses_or_says_what_is_wrong(text in "[a-z0-9_=,.]{0,40}") {
        let _ = host::select(HostKind::Sim);
        let cpc = Cpc::open(CPC_VER_CURRENT).expect("cpc_open");
        if let Err(message) = cpc::tool::spec::parse(cpc.platform(), &text) {
            prop_assert!(!message.is_empty());
        }
    }
}
