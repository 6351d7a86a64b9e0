//! The pmclog(3) C API. Built with the `capi` feature; libpmc exports these symbols.
