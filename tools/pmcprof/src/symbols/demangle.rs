//! Symbol names as people read them: Rust and C++ names demangled, PLT stubs kept apart.

/// What a PLT stub's name is its target's name followed by, as binutils' `objdump` names it.
pub(crate) const PLT_SUFFIX: &str = "@plt";

/// A readable form of a symbol name: Rust (legacy and v0) and C++ (Itanium) names are demangled,
/// anything else is returned as it is. Rust hashes are left out.
pub(crate) fn demangle(name: &str) -> String {
    if let Some(target) = name.strip_suffix(PLT_SUFFIX) {
        return format!("{}{PLT_SUFFIX}", demangle(target));
    }
    if name.starts_with("_R") || (name.starts_with("_ZN") && name.contains("17h")) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") {
        if let Ok(symbol) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = symbol.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangle_handles_rust_cpp_and_c_names() {
        assert_eq!(demangle("hot"), "hot");
        assert_eq!(demangle("_ZN3std2rt10lang_start17h0123456789abcdefE"), "std::rt::lang_start");
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_Z4workii"), "work(int, int)");
        assert_eq!(demangle("_Zbogus"), "_Zbogus");
        assert_eq!(demangle("_Z4workii@plt"), "work(int, int)@plt");
    }
}
