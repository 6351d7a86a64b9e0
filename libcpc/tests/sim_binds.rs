//! Binds on the simulator host, seen from the driver's side: a bind that fails part way leaves
//! no PMC allocated, and one that succeeds holds one PMC per counting request.

mod common;

use common::busy_rows;
use cpc::consts::{CPC_COUNT_USER, CPC_VER_CURRENT, Subcode};
use cpc::{Cpc, Set};
use pmc::host::{self, HostKind};
use pmc::{Mode, Pmc, PmcSpec};

fn set_of(cpc: &Cpc, events: &[&str]) -> Set {
    let mut set = Set::new();
    for event in events {
        set.add_request(cpc.platform(), event, 0, CPC_COUNT_USER, &[]).expect("add");
    }
    set
}

#[test]
fn a_bind_that_fails_at_its_last_counter_leaves_nothing_allocated() {
    host::select(HostKind::Sim).expect("the simulator host");
    let cpc = Cpc::open(CPC_VER_CURRENT).expect("cpc_open");
    let ncpu = cpc.platform().ncpu;
    // A system-counting PMC on each CPU takes one of the four general-purpose rows there; a
    // process PMC needs a row free on every CPU, so only three remain for the set's four.
    let blockers: Vec<Pmc> = (0..ncpu)
        .map(|cpu| {
            PmcSpec::new("event=0xc0,umask=0x00,usr")
                .mode(Mode::SystemCounting)
                .cpu(cpu)
                .allocate()
                .expect("a system PMC")
        })
        .collect();
    let before = busy_rows(ncpu);
    assert_eq!(before.len(), ncpu as usize, "{before:?}");
    let mut set = set_of(&cpc, &["PAPI_br_ins", "PAPI_br_msp", "PAPI_tot_cyc", "PAPI_l3_tca"]);
    let err = set.bind_curlwp(cpc.platform(), 0).expect_err("no fourth row");
    assert_eq!((err.errno, err.subcode), (libc::EINVAL, Some(Subcode::ResourceUnavail)), "{err}");
    assert!(!set.is_bound());
    assert_eq!(busy_rows(ncpu), before, "the three PMCs allocated before the failure are gone");

    drop(blockers);
    set.bind_curlwp(cpc.platform(), 0).expect("four free rows now");
    assert!(set.is_bound());
    set.unbind().expect("unbind");
    assert_eq!(busy_rows(ncpu), Vec::new());
}
