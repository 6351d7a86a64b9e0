#!/usr/bin/env bash
# Builds the example kernel and its ring-3 test program, boots it with qemu-system-x86_64 on two
# CPUs (KVM when /dev/kvm is usable, TCG otherwise; always under a timeout), and checks the
# console output and the hwpmc log with ring0-check. Exits non-zero on any failure.
#
#   bash tests/ring0/run.sh            # KVM if usable, else TCG
#   RING0_ACCEL=tcg bash tests/ring0/run.sh
#   RING0_CPUS=4 bash tests/ring0/run.sh
set -euo pipefail
cd "$(dirname "$0")"

target=x86_64-unknown-none
cpus=${RING0_CPUS:-2}
out=${RING0_OUT:-target/ring0-run}
mkdir -p "$out"

command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: qemu-system-x86_64 is missing (apt-get install qemu-system-x86)"; exit 1; }

# The kernel and its program need static relocation (they run where they are linked) and frame
# pointers (for callchains); RUSTFLAGS, when set, replaces .cargo/config.toml's flags.
host_rustflags=${RUSTFLAGS:-}
export RUSTFLAGS="${RUSTFLAGS:-} -C relocation-model=static -C force-frame-pointers=yes"
cargo build -q --locked -p ring0-user --target "$target"
user_elf=$PWD/target/$target/debug/ring0-user
RING0_USER_ELF=$user_elf cargo build -q --locked -p ring0-kernel --target "$target"
kernel_elf=$PWD/target/$target/debug/ring0-kernel
RUSTFLAGS=$host_rustflags cargo build -q --locked -p ring0-check

accel=${RING0_ACCEL:-}
if [ -z "$accel" ]; then
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then accel=kvm; else accel=tcg; fi
fi
case $accel in
    # MSR 0x10A (IA32_ARCH_CAPABILITIES) is left out: some nested hosts refuse QEMU's write of it.
    # An invariant TSC makes QEMU report the TSC's frequency in CPUID leaf 0x40000010. The
    # microvm machine boots the PVH kernel with almost no firmware (seconds less under a slow
    # nested KVM); TCG keeps the PC machine, whose PIT the kernel measures the TSC with.
    kvm) cpu_model=host,-arch-capabilities,+invtsc machine=microvm,pit=on,pic=on,isa-serial=on,rtc=on ;;
    tcg) cpu_model=max machine=pc ;;
    *) echo "run.sh: RING0_ACCEL must be kvm or tcg"; exit 1 ;;
esac

rm -f "$out/console.txt" "$out/hwpmc.log"
echo "run.sh: booting the kernel on $cpus CPUs with $accel ($machine)"
start=$(date +%s%N)
status=0
timeout 120 qemu-system-x86_64 -machine "$machine" -accel "$accel" -cpu "$cpu_model" -smp "$cpus" -m 128M \
    -kernel "$kernel_elf" -append "cpus=$cpus" -display none -no-reboot \
    -serial "file:$out/console.txt" \
    -chardev "file,id=hwpmclog,path=$out/hwpmc.log" -device isa-debugcon,iobase=0xe9,chardev=hwpmclog \
    -device isa-debug-exit,iobase=0xf4,iosize=0x04 || status=$?
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$out/console.txt"
echo "run.sh: QEMU ($accel) ran ${elapsed} ms and exited with $status"
# The kernel ends QEMU through isa-debug-exit: 0x10 (status 33) when its test passed.
if [ "$status" -ne 33 ]; then
    echo "run.sh: FAILED: the kernel did not end with success (status $status; 124 is the timeout)"
    exit 1
fi
./target/debug/ring0-check "$out/console.txt" "$out/hwpmc.log" "$kernel_elf" "$user_elf"
