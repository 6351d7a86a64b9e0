//! libcpc in a forked child (`c/libcpc/cpc_fork.c`): a process that bound an overflow request
//! forks 50 children, each binding its own and getting its own overflow signals, while the
//! parent keeps getting its own; and (`c/libcpc/cpc_fork_handles.c`) children forked while other
//! threads are inside libcpc calls. Built and run as `c_libcpc.rs` builds and runs its clients.
#![cfg(target_os = "linux")]

use hwpmc_tests::c_clients::{self, Library, Linkage};

#[test]
fn forked_children_bind_and_get_overflow_signals_and_so_does_the_parent_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let (out, err) =
            c_clients::run_with_stderr(Library::Cpc, "cpc_fork", linkage, "linux", &[]);
        assert_eq!(out, "forks 50 ok\n", "{err}");
    }
}

#[test]
fn a_fork_while_other_threads_are_in_libcpc_calls_leaves_the_child_a_working_libcpc() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let (out, err) =
            c_clients::run_with_stderr(Library::Cpc, "cpc_fork_handles", linkage, "linux", &[]);
        assert_eq!(out, "forks 100 ok\n", "{err}");
    }
}
