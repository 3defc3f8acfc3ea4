#!/usr/bin/env bash
# make board KDIR=<a ZynqMP kernel build>: what to install on an ExaNeSt QFDB
# (Documentation/qfdb.rst, "On a board"): the module built against KDIR (make module), and a
# devicetree overlay with the engine and its contexts, compiled with KDIR's dtc; then, as a
# check and a worked example, the overlay applied to the ZCU102's devicetree from KDIR's source
# (the QFDB's is not in the kernel tree: apply it to yours the same way).
# Usage: board.sh [--overlay-only] KDIR OUT
# The FPGA design's values, from the environment (defaults: the emulated engine's layout):
#   BOARD_BASE      the engine's register window (128 KiB), default 0xa0000000 (M_AXI_HPM0_FPD)
#   BOARD_CTX_BASE  the contexts' doorbell pages (4 KiB each), default BOARD_BASE + 0x40000
#   BOARD_CONTEXTS  contexts, default 16
#   BOARD_IRQ       the engine's PL-to-PS interrupt as a GIC SPI, default 89 (pl_ps_irq0)
#   BOARD_SID       the engine's own StreamID, default 0x200; context n's is BOARD_SID + 1 + n
#                   (the HP port's prefix followed by the AXI ID the design drives: UG1085's
#                   table of SMMU stream IDs)
. "$(dirname "$0")/common.sh"
only=0
[ "${1:-}" != --overlay-only ] || { only=1; shift; }
KDIR=${1:?usage: board.sh [--overlay-only] KDIR OUT}
OUT=${2:?usage: board.sh [--overlay-only] KDIR OUT}
base=${BOARD_BASE:-0xa0000000}
ctx_base=${BOARD_CTX_BASE:-$(printf 0x%x $((base + 0x40000)))}
n=${BOARD_CONTEXTS:-16}
irq=${BOARD_IRQ:-89}
sid=${BOARD_SID:-0x200}
dtc="$KDIR/scripts/dtc/dtc"
[ -x "$dtc" ] || die "no $dtc: KDIR is not a built kernel tree"
[ "$n" -ge 1 ] && [ "$n" -le 63 ] || die "BOARD_CONTEXTS must be 1..63 (six AXI ID bits, the engine's own first)"
mkdir -p "$OUT"

if [ $only = 0 ]; then
	log "board: the module against $KDIR"
	make -C "$TOP" module KDIR="$KDIR" MODULE_OUT="$OUT/module" || die "module build failed"
	cp "$OUT/module/exanest_dma.ko" "$OUT/"
fi

# The overlay: under the SoC's bus (zynqmp.dtsi's amba, two address cells), the engine's
# windows, its interrupt and StreamID, a node per context with its StreamID.
hi() { printf '0x%x' $(($1 >> 32)); }
lo() { printf '0x%x' $(($1 & 0xffffffff)); }
{
	echo "// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)"
	echo "// The ExaNeSt PLDMA engine on a Zynq UltraScale+ (scripts/board.sh: $n contexts,"
	echo "// registers at $base, doorbells at $ctx_base, SPI $irq, StreamID $sid)."
	echo "// Binding: Documentation/devicetree/bindings/dma/exanest,pldma.yaml"
	echo "/dts-v1/;"
	echo "/plugin/;"
	echo
	echo "&amba {"
	printf '\tdma@%x {\n' $((base))
	echo '		compatible = "exanest,pldma-1.0";'
	echo "		reg = <$(hi $base) $(lo $base) 0x0 0x20000>, <$(hi $ctx_base) $(lo $ctx_base) 0x0 $(printf 0x%x $((n * 4096)))>;"
	echo '		reg-names = "engine", "contexts";'
	echo "		interrupt-parent = <&gic>;"
	echo "		interrupts = <0 $irq 4>;"
	echo "		iommus = <&smmu $sid>;"
	echo "		#address-cells = <1>;"
	echo "		#size-cells = <0>;"
	for ((i = 0; i < n; i++)); do
		echo
		printf '\t\tcontext@%x {\n' $i
		echo '			compatible = "exanest,pldma-1.0-context";'
		printf '\t\t\treg = <%d>;\n' $i
		printf '\t\t\tiommus = <&smmu 0x%x>;\n' $((sid + 1 + i))
		echo "		};"
	done
	echo "	};"
	echo "};"
} >"$OUT/exanest-qfdb.dtso"
"$dtc" -@ -q -I dts -O dtb -o "$OUT/exanest-qfdb.dtbo" "$OUT/exanest-qfdb.dtso" ||
	die "dtc could not compile $OUT/exanest-qfdb.dtso"

# The worked example: the ZCU102's devicetree from KDIR's source, with symbols, and the overlay.
src=$(readlink -f "$KDIR/source" 2>/dev/null || echo "$KDIR")
dts="$src/arch/arm64/boot/dts/xilinx/zynqmp-zcu102-rev1.0.dts"
if [ -e "$dts" ] && [ -x "$KDIR/scripts/dtc/fdtoverlay" ]; then
	"clang-$LLVM_VERSION" -E -nostdinc -undef -D__DTS__ -x assembler-with-cpp \
		-I "$src/include" -I "$src/arch/arm64/boot/dts" -I "$src/arch/arm64/boot/dts/xilinx" \
		"$dts" 2>"$OUT/zcu102.log" | "$dtc" -@ -q -I dts -O dtb -o "$OUT/zynqmp-zcu102.dtb" - ||
		die "the ZCU102's devicetree did not build (log: $OUT/zcu102.log)"
	"$KDIR/scripts/dtc/fdtoverlay" -i "$OUT/zynqmp-zcu102.dtb" -o "$OUT/zynqmp-zcu102-exanest.dtb" \
		"$OUT/exanest-qfdb.dtbo" || die "the overlay does not apply to the ZCU102's devicetree"
	log "board: $OUT/zynqmp-zcu102-exanest.dtb (the overlay applied to the ZCU102's devicetree)"
fi
log "board: $OUT/exanest-qfdb.dtbo$([ $only = 1 ] || echo " and $OUT/exanest_dma.ko")"
