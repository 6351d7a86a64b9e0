//! The thread scope (`PMC_F_THREAD`, `PmcSpec::thread`) on the Linux host: a thread's
//! page-faults PMC counts the fresh pages that thread touches, not those another thread
//! touches at the same time; with inheritance, the threads it creates afterwards too.
#![cfg(target_os = "linux")]

use std::sync::{Arc, Barrier};

use pmc::{PmcSpec, api};

const PAGE: usize = 4096;
/// Fresh pages a toucher writes: each faults once (anonymous memory, no fault-around), so
/// its thread counts at least 90% of them (a few may come as huge pages) and a thread that
/// touches none counts far fewer.
const PAGES: usize = 3_000;

/// Touches `pages` fresh pages (one write each) and returns them so they stay mapped.
fn touch_fresh_pages(pages: usize) -> Vec<u8> {
    let mut v: Vec<u8> = Vec::with_capacity(pages * PAGE);
    for i in 0..pages {
        v.spare_capacity_mut()[i * PAGE].write(1);
    }
    v
}

/// A page-faults PMC of the calling thread (`inherit`: and of the threads it creates), started.
fn my_faults(inherit: bool) -> pmc::Pmc {
    let pmc = PmcSpec::new("page-faults").thread(inherit).allocate().unwrap();
    pmc.start().unwrap();
    pmc
}

#[test]
fn two_threads_each_count_their_own_page_faults() {
    let both = Arc::new(Barrier::new(2));
    let (toucher, idler) = (Arc::clone(&both), Arc::clone(&both));
    let touching = std::thread::spawn(move || {
        let pmc = my_faults(false);
        toucher.wait();
        let kept = touch_fresh_pages(PAGES);
        toucher.wait();
        let faults = pmc.read().unwrap();
        drop(kept);
        faults
    });
    let idling = std::thread::spawn(move || {
        let pmc = my_faults(false);
        idler.wait();
        // The other thread touches its pages now.
        idler.wait();
        pmc.read().unwrap()
    });
    let (touched, idled) = (touching.join().unwrap(), idling.join().unwrap());
    assert!(touched >= PAGES as u64 * 9 / 10, "the toucher's own faults: {touched}");
    assert!(idled < PAGES as u64 / 10, "the idle thread's: {idled}");
}

/// The faults a page-faults thread PMC of this thread (`inherit`) counts while a thread it
/// creates after the start touches [`PAGES`] fresh pages.
fn faults_of_a_new_thread(inherit: bool) -> u64 {
    std::thread::spawn(move || {
        let pmc = my_faults(inherit);
        let child = std::thread::spawn(|| drop(touch_fresh_pages(PAGES)));
        child.join().unwrap();
        pmc.read().unwrap()
    })
    .join()
    .unwrap()
}

#[test]
fn an_inheriting_thread_pmc_counts_the_threads_it_creates() {
    let faults = faults_of_a_new_thread(true);
    assert!(faults >= PAGES as u64 * 9 / 10, "with the new thread's: {faults}");
}

#[test]
fn a_thread_pmc_without_inherit_does_not_count_new_threads() {
    let faults = faults_of_a_new_thread(false);
    assert!(faults < PAGES as u64 / 10, "without the new thread's: {faults}");
}

#[test]
fn a_thread_pmc_attaches_to_no_other_process() {
    let pmc = PmcSpec::new("page-faults").thread(false).allocate().unwrap();
    let child = api::spawn(&["true".into()]).unwrap();
    let refused = pmc.attach(child).unwrap_err();
    assert_eq!(refused.errno, libc::EINVAL, "{refused}");
    api::resume(child).unwrap();
    assert_eq!(api::wait(child).unwrap(), 0);
    pmc.attach(0).unwrap();
    pmc.start().unwrap();
}
