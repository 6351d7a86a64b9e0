set -e
cd "$(dirname "$0")"
export RUSTC_WRAPPER=sccache
cargo build -q -p ring0-user --target x86_64-unknown-none
RING0_USER_ELF=$PWD/target/x86_64-unknown-none/debug/ring0-user cargo build -q -p ring0-kernel --target x86_64-unknown-none
