//! Compiles the one piece of libcpc that must be C: calling the application's error handler,
//! whose last parameter is a `va_list`, which only a variadic C function can make. (The other
//! variadic function, `pctx_set_events`, is an inline function of `<libpctx.h>`.)

fn main() {
    println!("cargo:rerun-if-changed=src/capi/variadic.c");
    cc::Build::new().file("src/capi/variadic.c").warnings(true).compile("cpc_variadic");
}
