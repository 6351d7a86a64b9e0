//! Test helpers: a small C program built with gcc, and logs written with pmclog's encoder. They
//! live in the workspace's test crate (`hwpmc_tests::analysis`) with the other shared helpers;
//! this module names them for the unit tests.

pub(crate) use hwpmc_tests::analysis::{
    CPU_CLK_UNHALTED_CORE, INSTR_RETIRED_ANY, LogBuilder, Program, SOURCE, functions_of,
    hot_warm_main,
};
