//! Sets bound with `CPC_BIND_MULTIPLEX` on the simulator host (a Skylake with 4 GP counters):
//! two sets that each need every GP counter take turns on them, each set counted as a whole,
//! and sampled values are scaled to the whole run. Without the flag the second bind replaces
//! the first, as illumos's.

use cpc::consts::{CPC_BIND_MULTIPLEX, CPC_COUNT_USER, CPC_VER_CURRENT};
use cpc::pctx::{Pctx, PctxEvents};
use cpc::{Buf, Cpc, Set};
use pmc::host::{self, HostKind};

fn set_of(cpc: &Cpc, events: &[&str]) -> Set {
    let mut set = Set::new();
    for event in events {
        set.add_request(cpc.platform(), event, 0, CPC_COUNT_USER, &[]).expect("add");
    }
    set
}

struct Quiet;
impl PctxEvents for Quiet {}

/// Four branch counters: every GP counter (hot-cold retires 1 000 000 branches, at one rate).
const BRANCHES: [&str; 4] = ["PAPI_br_ins"; 4];

#[test]
fn two_full_sets_take_turns_and_read_scaled_counts() {
    host::select(HostKind::Sim).expect("the simulator host");
    let cpc = Cpc::open(CPC_VER_CURRENT).expect("cpc_open");
    let mut pctx = Pctx::create(&["hot-cold".into()]).expect("pctx_create");
    let (pid, lwp) = (pctx.pid(), pctx.lwp());
    let mut first = set_of(&cpc, &BRANCHES);
    let mut second = set_of(&cpc, &BRANCHES);
    first.bind_pctx(cpc.platform(), &pctx, lwp, 0).expect("the counters are free");
    // Without the flag the second bind replaces the first, as illumos's.
    second.bind_pctx(cpc.platform(), &pctx, lwp, 0).expect("the first set's counters");
    assert!(!first.is_bound() && second.is_bound());
    second.unbind().unwrap();
    first.bind_process(cpc.platform(), pid, lwp, CPC_BIND_MULTIPLEX).expect("first set");
    second.bind_process(cpc.platform(), pid, lwp, CPC_BIND_MULTIPLEX).expect("second set, turns");
    pctx.run(0, 0, &mut Quiet).expect("pctx_run");
    for (name, set) in [("first", &first), ("second", &second)] {
        let mut buf = Buf::new(BRANCHES.len());
        set.sample(&mut buf).expect("sample");
        let values: Vec<u64> = (0..BRANCHES.len()).map(|i| buf.get(i).unwrap()).collect();
        // One group: every request of the set counted over the same turns, so the same value.
        assert!(values.iter().all(|&v| v == values[0]), "{name}: {values:?}");
        let error = (values[0] as f64 - 1_000_000.0).abs() / 1_000_000.0;
        assert!(error < 0.02, "{name}: scaled {} against 1 000 000", values[0]);
    }
}
