# ExaNeSt DMA: fault-tolerant virtual-address RDMA for the ExaNeSt PLDMA engine.
#
#   make demo    build what is missing, boot QEMU and run the demo in the guest
#   make check   every test: host cargo test, lints, builds, model qtest, guest end-to-end
#   make shell   boot the guest with an interactive shell (Ctrl-A X quits QEMU)
#   make mpi     two guests with Debian's Open MPI: an MPI job over the engine (NetPIPE, mpi4py)
#   make nodes   two guests, one node each, linked over a unix socket: the two-guest tests,
#                the link recorded in build/pcap (NODES_RUN=shell: a shell on each node)
#   make soak    long stress runs (races, fuzzer) on the test kernel, not part of make check
#   make evaluate  the evaluation, on its own kernel without debugging options
#   make profile [BENCH='fault-service --reps 1']  the guest's instructions per function in the
#                spans an exanest-bench command times (scripts/profile.sh)
#
# Everything heavy (kernel, QEMU) is cached under $(CACHE), keyed by what it is built from.

CACHE ?= /var/cache/exanest-dma
export EXANEST_CACHE := $(CACHE)
SHELL := /bin/bash
TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
include $(TOP)/scripts/versions.env
INITRD := $(TOP)/build/initramfs.cpio

.PHONY: all check demo shell qemu setup kernel qemu-bin initramfs clean evaluate

all: demo

setup:
	@$(TOP)/scripts/setup-host.sh

kernel: setup
	@$(TOP)/scripts/build-kernel.sh

qemu-bin: setup
	@$(TOP)/scripts/build-qemu.sh

check:
	@$(TOP)/scripts/check.sh

# The whole evaluation (8 to 13 min on a 2-core machine, `time make evaluate`, plus the
# evaluation kernel's build the first time, about 7 min): regenerates Documentation/evaluation.rst. It runs on
# its own kernel, without the test kernel's debugging options (scripts/build-kernel.sh eval).
evaluate: setup
	@$(TOP)/scripts/evaluate.sh

# Where the time of a bench's timed spans goes: instructions per kernel and module function,
# counted by a TCG plugin under -icount (about 25 s cached, plus the evaluation kernel's build).
BENCH ?= fault-service --reps 1
.PHONY: profile
profile: setup
	@$(TOP)/scripts/profile.sh $(BENCH)

# Boot helpers: build (or find in the cache) the kernel and QEMU, build the module and the guest
# tools, assemble the initramfs, boot.
define boot
	@set -e; kb=$$($(TOP)/scripts/build-kernel.sh); q=$$($(TOP)/scripts/build-qemu.sh); \
	$(MAKE) -s --no-print-directory module KDIR="$$kb" >/dev/null; \
	$(TOP)/scripts/build-guest-rust.sh >/dev/null; \
	$(TOP)/scripts/build-initramfs.sh "$$kb" $(INITRD); \
	QEMU="$$q" KERNEL="$$kb/arch/arm64/boot/Image" INITRD=$(INITRD) TIMEOUT=$(2) \
		$(TOP)/scripts/run-qemu.sh $(1)
endef

# make demo tells its story: the kernel's boot log goes to build/logs/demo-boot.log (printed
# only when the guest does not boot), the console from GUEST-BOOTED on to the terminal.
demo: setup
	@set -eo pipefail; mkdir -p $(TOP)/build/logs; \
	kb=$$($(TOP)/scripts/build-kernel.sh); q=$$($(TOP)/scripts/build-qemu.sh); \
	$(MAKE) -s --no-print-directory module KDIR="$$kb" >/dev/null; \
	$(TOP)/scripts/build-guest-rust.sh >/dev/null; \
	$(TOP)/scripts/build-initramfs.sh "$$kb" $(INITRD); \
	QEMU="$$q" KERNEL="$$kb/arch/arm64/boot/Image" INITRD=$(INITRD) TIMEOUT=900 \
		$(TOP)/scripts/run-qemu.sh demo | awk -v boot=$(TOP)/build/logs/demo-boot.log \
		'up { print; fflush(); next } /GUEST-BOOTED/ { up = 1; print; fflush(); next } \
		{ print > boot } END { if (!up) { close(boot); system("cat " boot); \
		print "demo: the guest did not boot (boot log above)"; exit 1 } }'
	@echo; echo "=== Two guests, two kernels: nodes 0 and 1 over a unix socket (scripts/run-nodes.py) ==="
	@kb=$$($(TOP)/scripts/build-kernel.sh); q=$$($(TOP)/scripts/build-qemu.sh); \
	QEMU="$$q" KERNEL="$$kb/arch/arm64/boot/Image" INITRD=$(INITRD) \
		$(TOP)/scripts/run-nodes.py --timeout 600 --pcap $(TOP)/build/pcap demo-nodes | \
		grep -av -E '^\[n[01]\] \[ *[0-9]+\.[0-9]+\]|GUEST-(BOOTED|DONE)|^\[n[01]\] *$$'

# Long stress runs, not part of make check: the deregistration races at RACE_ITER iterations each
# and the ioctl fuzzer at FUZZ_CALLS calls, on the test kernel; the console is judged as in make
# check (KASAN, lockdep, hung tasks...). About 65 minutes at the defaults on a 2-core machine
# (measured at RACE_ITER=30000 FUZZ_CALLS=1000000: 22 min).
RACE_ITER ?= 100000
FUZZ_CALLS ?= 1000000
.PHONY: soak
soak: setup
	@set -e; kb=$$($(TOP)/scripts/build-kernel.sh); q=$$($(TOP)/scripts/build-qemu.sh); \
	$(MAKE) -s --no-print-directory module KDIR="$$kb" >/dev/null; \
	$(TOP)/scripts/build-guest-rust.sh >/dev/null; \
	$(TOP)/scripts/build-initramfs.sh "$$kb" $(INITRD); mkdir -p $(TOP)/build/logs; \
	for p in pci mmu500; do \
		log=$(TOP)/build/logs/soak-$$p.log; \
		PLATFORM=$$p QEMU="$$q" KERNEL="$$kb/arch/arm64/boot/Image" INITRD=$(INITRD) TIMEOUT=14400 \
			QEMU_APPEND="exanest.race_iter=$(RACE_ITER) exanest.fuzz_calls=$(FUZZ_CALLS)" \
			$(TOP)/scripts/run-qemu.sh /usr/share/exanest/soak.sh | tee $$log; \
		python3 $(TOP)/tests/harness/console.py $$log; \
	done

NODES_RUN ?= nodes
.PHONY: nodes
nodes: setup
	@set -e; kb=$$($(TOP)/scripts/build-kernel.sh); q=$$($(TOP)/scripts/build-qemu.sh); \
	$(MAKE) -s --no-print-directory module KDIR="$$kb" >/dev/null; \
	$(TOP)/scripts/build-guest-rust.sh >/dev/null; \
	$(TOP)/scripts/build-initramfs.sh "$$kb" $(INITRD); \
	QEMU="$$q" KERNEL="$$kb/arch/arm64/boot/Image" INITRD=$(INITRD) \
		$(TOP)/scripts/run-nodes.py --pcap $(TOP)/build/pcap $(NODES_RUN)

# make mpi: an MPI job across two guests over the engine (Open MPI's NetPIPE and an mpi4py
# program), with the guests' Debian disk (libfabric, Open MPI): Documentation/libfabric.rst.
.PHONY: mpi
mpi: setup
	@set -eo pipefail; kb=$$($(TOP)/scripts/build-kernel.sh); q=$$($(TOP)/scripts/build-qemu.sh); \
	$(MAKE) -s --no-print-directory module KDIR="$$kb" >/dev/null; \
	$(TOP)/scripts/build-guest-rust.sh >/dev/null; \
	$(TOP)/scripts/build-initramfs.sh "$$kb" $(INITRD); \
	disk=$$($(TOP)/scripts/build-guest-debian.sh); \
	QEMU="$$q" KERNEL="$$kb/arch/arm64/boot/Image" INITRD=$(INITRD) GUEST_DISK="$$disk" QEMU_MEM=1536M \
		$(TOP)/scripts/run-nodes.py --timeout 900 mpi | \
		grep -av -E '^\[n[01]\] \[ *[0-9]+\.[0-9]+\]|GUEST-(BOOTED|DONE)|^\[n[01]\] *$$|^\[n1\] bye$$'

shell qemu: setup
	$(call boot,shell,0)

initramfs: setup
	@kb=$$($(TOP)/scripts/build-kernel.sh) && $(TOP)/scripts/build-initramfs.sh "$$kb" $(INITRD)

clean:
	rm -rf $(TOP)/build
	cd $(TOP)/rust && cargo clean

# The kernel module, built out of tree against the cached kernel (or KDIR=...).
KDIR ?= $(shell $(TOP)/scripts/build-kernel.sh)
MODULE_OUT ?= $(TOP)/build/module
.PHONY: module
# drivers/ffi.rs includes the shim's declarations, generated from drivers/exanest_shim.h.
SHIM_BINDINGS := $(MODULE_OUT)/generated/exanest_shim.rs
module:
	@mkdir -p $(MODULE_OUT)
	@$(TOP)/scripts/shim-bindings.sh $(KDIR) $(SHIM_BINDINGS)
	EXANEST_SHIM_BINDINGS=$(SHIM_BINDINGS) \
		$(MAKE) -C $(KDIR) M=$(TOP) MO=$(MODULE_OUT) ARCH=arm64 LLVM=-$(LLVM_VERSION) modules

# What to install on an ExaNeSt QFDB (Documentation/qfdb.rst, "On a board"): the module built
# against KDIR (a ZynqMP kernel build with this project's patches) and a devicetree overlay for
# the engine and its contexts, in BOARD_OUT. The design's values: BOARD_BASE, BOARD_CTX_BASE,
# BOARD_CONTEXTS, BOARD_IRQ, BOARD_SID (scripts/board.sh).
BOARD_OUT ?= $(TOP)/build/board
.PHONY: board
board: setup
	@$(TOP)/scripts/board.sh $(KDIR) $(BOARD_OUT)

# Your own program in the guest (Documentation/user-programs.rst).
#   make install-lib [PREFIX=DIR]   the user library for the guest (aarch64): headers, static
#                                   library and pkg-config file under PREFIX
#                                   (default build/guest-bin/sysroot)
#   make run-prog PROG='FILE...' [ARGS='...'] [RUN='CMD; CMD...'] [KERNEL_FLAVOUR=eval]
#                 [RUN_TIMEOUT=S]
#                                   boot the guest once, load the driver, put the static aarch64
#                                   programs FILE... in /bin, run RUN (default: the first
#                                   program with ARGS), dump the kernel log, power off; then
#                                   judge that log and end with one "run-prog: kernel log:" line
#                                   (exit status 1 on a kernel report). KERNEL_FLAVOUR=eval
#                                   boots the evaluation kernel (no KASAN, lockdep...) for timing.
PREFIX ?= $(TOP)/build/guest-bin/sysroot
RUN_TIMEOUT ?= 900
KERNEL_FLAVOUR ?= debug
RUN_DIR := $(TOP)/build/run-prog
RUN ?= $(notdir $(firstword $(PROG))) $(ARGS)
.PHONY: install-lib run-prog

install-lib: setup
	@SYSROOT="$(abspath $(PREFIX))" $(TOP)/scripts/build-guest-rust.sh >/dev/null
	@echo "installed under $(abspath $(PREFIX)); build with:"
	@echo "  PKG_CONFIG_PATH=$(abspath $(PREFIX))/lib/pkgconfig pkg-config --static --cflags --libs exanest-dma"

run-prog: setup
	@[ -n "$(PROG)" ] && for p in $(PROG); do [ -f "$$p" ] || exit 1; done || \
		{ echo "usage: make run-prog PROG='static-aarch64-binary...' [ARGS='...'] [RUN='cmd; cmd']" >&2; exit 2; }
	@set -e; kb=$$($(TOP)/scripts/build-kernel.sh $(KERNEL_FLAVOUR)); q=$$($(TOP)/scripts/build-qemu.sh); \
	mo=$(TOP)/build/module$(if $(filter eval,$(KERNEL_FLAVOUR)),-eval); \
	rm -rf $(RUN_DIR); mkdir -p $(RUN_DIR)/root/bin $(RUN_DIR)/root/usr/share/exanest; \
	$(MAKE) -s --no-print-directory module KDIR="$$kb" MODULE_OUT=$$mo >/dev/null; \
	$(TOP)/scripts/build-guest-rust.sh >/dev/null; \
	MODULE_KO=$$mo/exanest_dma.ko $(TOP)/scripts/build-initramfs.sh "$$kb" $(RUN_DIR)/base.cpio; \
	install -m 755 $(PROG) $(RUN_DIR)/root/bin/; \
	printf '%s\n' 'insmod /lib/exanest_dma.ko || exit 1' '$(RUN)' \
		'echo "run-prog: exited with $$?"' 'echo GUEST-DMESG-BEGIN; dmesg; echo GUEST-DMESG-END' \
		>$(RUN_DIR)/root/usr/share/exanest/run-prog.sh; \
	(cd $(RUN_DIR)/root && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >$(RUN_DIR)/extra.cpio; \
	cat $(RUN_DIR)/base.cpio $(RUN_DIR)/extra.cpio >$(RUN_DIR)/initramfs.cpio; \
	QEMU="$$q" KERNEL="$$kb/arch/arm64/boot/Image" INITRD=$(RUN_DIR)/initramfs.cpio \
		TIMEOUT=$(RUN_TIMEOUT) $(TOP)/scripts/run-qemu.sh /usr/share/exanest/run-prog.sh \
		| tee $(RUN_DIR)/console.log | sed '/^GUEST-DMESG-BEGIN/,/^GUEST-DMESG-END/d'; \
	python3 $(TOP)/tests/harness/console.py $(RUN_DIR)/console.log --reports-only
