//! libcpc on the simulator's AMD models: the PICs are AMD's core counters, the generic events
//! count what AMD's event data (through libpmc's catalog) says they count, raw codes take
//! AMD's 12-bit event selects, and a `umask` attribute is ORed into a named event's unit mask.
//! One test, as the simulated model is chosen through libpmc's process-wide settings.

use cpc::platform::Backend;
use cpc::{Cpc, consts::CPC_VER_CURRENT};
use pmc::config::{self, Config, SimConfig};
use pmc::events::EventKind;
use pmc::host::{self, HostKind};

/// The PERF_CTL image libpmc gives `spec`.
fn perf_ctl(spec: &str) -> u64 {
    match pmc::api::lookup_event(spec).unwrap_or_else(|e| panic!("{spec}: {e}")).kind {
        EventKind::K8 { perf_ctl } => perf_ctl,
        other => panic!("{spec} is not an AMD core event: {other:?}"),
    }
}

/// Runs `check` on a fresh thread (whose simulated machine is made from libpmc's settings) with
/// the `PMC_SIM_MODEL` setting = `model`.
fn on_model(model: &str, check: impl FnOnce(Cpc) + Send + 'static) {
    // No other thread runs while the setting changes (each model's thread is joined before the
    // next one is set).
    let sim = SimConfig { model: Some(model.into()), ..SimConfig::default() };
    config::install(Config { sim, ..Config::default() });
    std::thread::spawn(move || check(Cpc::open(CPC_VER_CURRENT).expect("cpc_open")))
        .join()
        .unwrap_or_else(|_| panic!("on {model}"));
}

/// Zen 4's and Zen 2's generic events and the events of AMD's data (Linux perf's `amdzen4` and
/// `amdzen2` JSON) that count the same (`None`: the data has no event of that unit mask).
const ZEN_EVENTS: [(&str, Option<&str>, Option<&str>); 9] = [
    ("PAPI_tot_cyc", Some("ls_not_halted_cyc"), Some("ls_not_halted_cyc")),
    ("PAPI_tot_ins", Some("ex_ret_instr"), Some("ex_ret_instr")),
    ("PAPI_br_ins", Some("ex_ret_brn"), Some("ex_ret_brn")),
    ("PAPI_br_cn", Some("ex_ret_cond"), Some("ex_ret_cond")),
    ("PAPI_br_msp", Some("ex_ret_brn_misp"), Some("ex_ret_brn_misp")),
    ("PAPI_tlb_dm", Some("ls_l1_d_tlb_miss.all"), Some("ls_l1_d_tlb_miss.all")),
    ("PAPI_tlb_im", Some("bp_l1_tlb_miss_l2_tlb_miss.all"), Some("bp_l1_tlb_miss_l2_tlb_miss")),
    ("PAPI_l2_tca", Some("l2_request_g1.all"), None),
    ("PAPI_l2_tcm", Some("l2_cache_req_stat.ic_dc_miss_in_l2"), None),
];

#[test]
fn amd_counters_generic_events_raw_codes_and_unit_masks() {
    host::select(HostKind::Sim).expect("the simulator host");
    for (model, zen4) in [("zen4", true), ("zen2", false)] {
        on_model(model, move |cpc| {
            let platform = cpc.platform();
            assert_eq!(platform.backend, Backend::Amd);
            assert_eq!(cpc.npic(), 6, "{model}");
            assert_eq!(platform.pics[0].generics.len(), ZEN_EVENTS.len(), "{model}");
            for (generic, zen4_name, zen2_name) in ZEN_EVENTS {
                let spec = platform.pics[5].generic(generic).unwrap_or_else(|| panic!("{generic}"));
                let Some(name) = (if zen4 { zen4_name } else { zen2_name }) else { continue };
                assert_eq!(perf_ctl(spec), perf_ctl(name), "{model}: {generic} is {name}");
            }
            // A raw code has 12 bits: bits 8-11 go to PERF_CTL bits 35:32.
            let raw = platform.spec_on(0, "0x4e1", Some(0xf7)).expect("a raw code on pic0");
            assert_eq!(perf_ctl(&raw), 0x4_0003_f7e1, "{raw}: both rings without qualifiers");
            // A unit mask attribute is ORed into the named event's own (illumos on AMD).
            let name = if zen4 { "bp_l1_tlb_fetch_hit.if2m" } else { "bp_l1_tlb_fetch_hit.if4k" };
            let own = perf_ctl(name) >> 8 & 0xff;
            let ored = platform.amd_with_umask(name, 0x04).expect("an AMD event");
            assert_eq!(perf_ctl(&ored) >> 8 & 0xff, own | 0x04, "{model}: {ored}");
            assert_eq!(perf_ctl(&ored) & !0xff00, perf_ctl(name) & !0xff00, "{model}: {ored}");
            assert_eq!(platform.amd_with_umask("PAPI_tot_ins", 1), None, "not a named event");
        });
    }
    on_model("k10", |cpc| {
        assert_eq!((cpc.npic(), cpc.cciname()), (4, "AMD Family 10h"));
        // Family 10h's L3 misses (a northbridge event the core counters count there).
        let spec = cpc.platform().pics[3].generic("PAPI_l3_tcm").expect("PAPI_l3_tcm");
        assert_eq!(perf_ctl(spec), 0x4_0003_f7e1);
        assert!(cpc.platform().pics[0].events.is_empty(), "libpmc has no table of family 10h");
    });
}
