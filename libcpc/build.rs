//! Compiles the piece of libcpc that must be C: the two variadic functions, calling the
//! application's error handler (whose last parameter is a `va_list`, which only a variadic C
//! function can make) and reading `pctx_set_events`' argument list.
//!
//! And makes `-lpctx` work as libpctx(3LIB) says: libpctx is part of libcpc here, so
//! `libpctx.so` and `libpctx.a` are symbolic links to `libcpc.so` and `libcpc.a`, next to them
//! in the profile directory (`target/<profile>`) and in its `deps` (where the tests find them).
//! The links are made before the libraries exist and point at them by name; the loader maps a
//! program linked with both `-lcpc -lpctx` once (one file).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src/capi/variadic.c");
    println!("cargo:rerun-if-changed=build.rs");
    cc::Build::new().file("src/capi/variadic.c").warnings(true).compile("cpc_variadic");
    if let Some(profile) = profile_dir() {
        for dir in [profile.clone(), profile.join("deps")] {
            for (link, target) in [("libpctx.so", "libcpc.so"), ("libpctx.a", "libcpc.a")] {
                if let Err(e) = link_to(&dir, link, target) {
                    println!("cargo:warning=cannot link {}/{link} to {target}: {e}", dir.display());
                }
            }
        }
    }
}

/// `target/[<triple>/]<profile>`: `OUT_DIR` is `<profile>/build/libcpc-<hash>/out`.
fn profile_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    out.ancestors().nth(3).map(Path::to_path_buf)
}

/// Makes `dir/link` a symbolic link to `target` (in the same directory). A link already there
/// is replaced; anything else named so is left alone (it is not ours).
fn link_to(dir: &Path, link: &str, target: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(link);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if std::fs::read_link(&path)? == Path::new(target) {
                return Ok(());
            }
            std::fs::remove_file(&path)?;
        }
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    #[cfg(unix)]
    return std::os::unix::fs::symlink(target, &path);
    #[cfg(not(unix))]
    Ok(())
}
