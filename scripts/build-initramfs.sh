#!/usr/bin/env bash
# Assemble the guest initramfs: Debian's arm64 busybox, the init scripts and guest tools of
# tests/guest/, the raw-ABI example examples/demo.c, and the kernel's modules.
# Usage: build-initramfs.sh KERNEL_BUILD_DIR OUTPUT.cpio
. "$(dirname "$0")/common.sh"
KBUILD=${1:?kernel build dir}
OUTPUT=${2:?output cpio}
MODROOT="$(dirname "$KBUILD")/modroot"
WORK="$TOP/build/guest"
ROOT="$WORK/root"

rm -rf "$ROOT"; mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,tmp,root,etc,usr/share/exanest,lib}
cp "$DL/busybox-arm64" "$ROOT/bin/busybox"
install -m 755 "$TOP/tests/guest/init" "$ROOT/init"
install -m 644 "$TOP/tests/guest/demo.sh" "$TOP/tests/guest/check.sh" "$TOP/tests/guest/eval.sh" \
	"$TOP/tests/guest/soak.sh" "$TOP/tests/guest/nodes.sh" "$TOP/tests/guest/demo-nodes.sh" \
	"$TOP/tests/guest/profile.sh" "$TOP/tests/guest/fabric.sh" "$TOP/tests/guest/mpi.sh" \
	"$TOP/tests/guest/mpi4py-test.py" "$TOP/tests/guest/mpi-demo.sh" "$TOP/tests/guest/eval-mpi.sh" \
	"$TOP/tests/guest/harness.sh" "$TOP/tests/guest/check-qfdb.sh" \
	"$ROOT/usr/share/exanest/"
echo 'root:x:0:0:root:/root:/bin/sh' >"$ROOT/etc/passwd"
# Open MPI's remote shell in the guests (python3 from the Debian disk).
install -m 755 "$TOP/tests/guest/exanest-rsh" "$ROOT/bin/exanest-rsh"

# Guest tools: static aarch64 binaries.
CFLAGS="-static -O2 -Wall -Wextra -Werror"
aarch64-linux-gnu-gcc $CFLAGS -o "$ROOT/bin/pldma-probe" "$TOP/tests/guest/pldma-probe.c"
# The raw-ABI example that `make demo` runs.
aarch64-linux-gnu-gcc $CFLAGS -I "$TOP/include/uapi" -o "$ROOT/bin/exanest-demo" "$TOP/examples/demo.c"
# The driver's end-to-end tests, one binary per topic, on the kselftest harness of the pinned
# kernel source (kselftest_harness.h and kselftest.h, used from there, not copied). The harness's
# EXPECT_* macros compare across signedness: -Wsign-compare is off for them. exanest-fuzz is the
# ioctl fuzzer, on the same harness (exanest-fuzz -h for its options).
KSFT="$KBUILD/source/tools/testing/selftests"
[ -e "$KSFT/kselftest_harness.h" ] || die "no kselftest_harness.h in $KSFT (kernel source)"
for t in sizes coherence fork errors contexts queues net concurrency hardening race fuzz; do
	aarch64-linux-gnu-gcc $CFLAGS -Wno-sign-compare -I "$KSFT" -I "$TOP/include/uapi" \
		-o "$ROOT/bin/exanest-$t" "$TOP/tests/guest/exanest-$t.c" -lpthread
done

# The libfabric provider's test, against Debian's arm64 libfabric 1.17 (the guests' Debian disk,
# scripts/build-guest-debian.sh), dynamically linked as the programs of that disk are.
DEB="$(dirname "$("$TOP/scripts/build-guest-debian.sh")")/root"
aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -Wno-sign-compare -I "$KSFT" -I "$DEB/usr/include" \
	-o "$ROOT/bin/exanest-fabric" "$TOP/tests/guest/exanest-fabric.c" \
	-L "$DEB/usr/lib/aarch64-linux-gnu" -lfabric \
	-Wl,-rpath-link,"$DEB/usr/lib/aarch64-linux-gnu:$DEB/lib/aarch64-linux-gnu"
# make evaluate's streaming bandwidth of the provider (tests/guest/eval-mpi.sh), the same way.
aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -Wno-sign-compare -I "$DEB/usr/include" \
	-o "$ROOT/bin/exanest-fi-bw" "$TOP/tests/guest/exanest-fi-bw.c" \
	-L "$DEB/usr/lib/aarch64-linux-gnu" -lfabric \
	-Wl,-rpath-link,"$DEB/usr/lib/aarch64-linux-gnu:$DEB/lib/aarch64-linux-gnu"
# The MPI application of make mpi and the MPI tests, against the same disk's Open MPI (mpi.h from
# libopenmpi-dev, unpacked beside the image, sdk/).
aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -I "$DEB/../sdk/usr/lib/aarch64-linux-gnu/openmpi/include" \
	-o "$ROOT/bin/mpi-stencil" "$TOP/examples/mpi-stencil.c" \
	"$DEB/usr/lib/aarch64-linux-gnu/libmpi.so.40" \
	-Wl,-rpath-link,"$DEB/usr/lib/aarch64-linux-gnu:$DEB/lib/aarch64-linux-gnu"

# The user library's tools and examples (scripts/build-guest-rust.sh), when built.
for b in exanest-cli exanest-bench copy-rs copy-c odp-rs odp-c queue-c put-rs put-c mailbox-rs nodes-rs forget-rs exanest-lib; do
	[ -e "$TOP/build/guest-bin/$b" ] && install -m 755 "$TOP/build/guest-bin/$b" "$ROOT/bin/"
done

# The libfabric provider (Documentation/libfabric.rst), where tests/guest/init's FI_PROVIDER_PATH
# points libfabric.
if [ -e "$TOP/build/guest-bin/libexanest-fi.so" ]; then
	mkdir -p "$ROOT/usr/lib/exanest"
	install -m 755 "$TOP/build/guest-bin/libexanest-fi.so" "$ROOT/usr/lib/exanest/"
fi

# Kernel modules: the kernel's own (test_hmm.ko) and the driver, when built (make module).
[ -d "$MODROOT/lib/modules" ] && cp -a "$MODROOT/lib/modules" "$ROOT/lib/"
# MODULE_KO: the driver built for this kernel (default: make module's, for the test kernel).
MODULE_KO=${MODULE_KO:-$TOP/build/module/exanest_dma.ko}
[ -e "$MODULE_KO" ] && cp "$MODULE_KO" "$ROOT/lib/"

(cd "$ROOT" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$OUTPUT.tmp"
mv "$OUTPUT.tmp" "$OUTPUT"
