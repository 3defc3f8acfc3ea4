#!/usr/bin/env bash
# The guests' Debian arm64 user space for the libfabric and MPI runs (Documentation/libfabric.rst):
# GUEST_DEBS below (libfabric, Open MPI, NetPIPE, mpi4py) and their closure of
# dependencies, fetched from Debian as .debs, unpacked with dpkg-deb -x (no maintainer scripts
# run), pruned, and packed into a read-only ext4 image that scripts/run-qemu.sh attaches as a
# virtio disk (GUEST_DISK) and tests/guest/init grafts onto the initramfs's root.
#
# The closure is resolved by apt as if on an empty arm64 system (no Recommends), so it is the same
# on every host with the same Debian archive. Cached under $CACHE/guest-debian-<key>, where <key>
# hashes the resolved list (name, version, architecture), the prune list and this recipe; the
# .debs themselves under $CACHE/dl/debs. Prints the image's path on stdout; the headers programs
# are built against (SDK_DEBS) are in sdk/ beside it.
. "$(dirname "$0")/common.sh"
exec 3>&1 1>&2

# Bump RECIPE when this script changes what goes into the image.
RECIPE=2
# What the runs use, pinned (bookworm's versions; the closure follows from them): libfabric's
# fi_info and fi_pingpong, its headers (the provider's bindings are made from the host's copy of
# the same package, scripts/setup-host.sh), Open MPI, NetPIPE and mpi4py.
GUEST_DEBS="libfabric-bin=1.17.0-3 libfabric-dev=1.17.0-3 openmpi-bin=4.1.4-3+b1
 netpipe-openmpi=3.7.2-8 python3-mpi4py=3.1.4-2+b2"
# What programs for the guest are compiled against, not put in the image: Open MPI's headers
# (mpi.h, for examples/mpi-stencil.c), unpacked into the SDK directory beside the image (sdk/).
SDK_DEBS="libopenmpi-dev=4.1.4-3+b1"
# Packages the runs never use, and what only they pull in: the package tools and PAM (nothing is
# installed or logs in), ssh (the launcher's agent is ours, exanest-rsh), and hwloc's plugins
# with their ICU, libxml2, X11 and OpenCL (hwloc runs without plugins). About 60 MiB unpacked.
PRUNE="adduser debconf dpkg tar passwd libpam0g libpam-modules libpam-modules-bin
 libsemanage-common libsemanage2 libsepol2 libaudit-common libaudit1 libcap-ng0
 openssh-client libfido2-1 libcbor0.8 libedit2
 libhwloc-plugins libicu72 libxml2 libxnvctrl0 ocl-icd-libopencl1 libxext6 libx11-6 libx11-data
 libxcb1 libxau6 libxdmcp6"

# As if on arm64 alone; downloads as root into the cache (no _apt sandbox user to warn about).
APT=(-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Debug::NoLocking=1
	-o APT::Sandbox::User=root)
# apt's resolution, kept while the package lists and the request are the same (every initramfs
# build asks: twice per make check).
lists=$(printf '%s\n' "$GUEST_DEBS" "$(dpkg --print-foreign-architectures)" \
	"$(stat -c '%n %s %Y' /var/lib/apt/lists/*Packages* /etc/apt/sources.list \
		/etc/apt/sources.list.d/* 2>/dev/null)" | sha256sum | cut -c1-16)
resolved="$CACHE/guest-debian-resolved-$lists"
if [ -s "$resolved" ]; then
	closure=$(cat "$resolved")
else
	empty=$(mktemp)
	trap 'rm -f "$empty"' EXIT
	# shellcheck disable=SC2086
	list=$(apt-get -s install --no-install-recommends "${APT[@]}" -o Dir::State::status="$empty" \
		$GUEST_DEBS 2>&1) || { echo "$list" | tail -20 >&2; die "apt cannot resolve GUEST_DEBS for arm64 ($GUEST_DEBS); is the arm64 architecture enabled (scripts/setup-host.sh)?"; }
	# "Inst NAME (VERSION SUITE [ARCH])"
	closure=$(echo "$list" | sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*\[\([a-z0-9]*\)\]).*$/\1 \2 \3/p' | LC_ALL=C sort)
	[ -n "$closure" ] || die "apt resolved no packages for $GUEST_DEBS"
	mkdir -p "$CACHE"
	echo "$closure" >"$resolved.tmp" && mv "$resolved.tmp" "$resolved"
fi
KEY=$(printf '%s\n' "$RECIPE" "$closure" "$PRUNE" "$SDK_DEBS" | sha256sum | cut -c1-16)
OUT="$CACHE/guest-debian-$KEY"
IMG="$OUT/debian.ext4"
if [ -e "$OUT/.done" ]; then echo "$IMG" >&3; exit 0; fi
# Its own lock, not build_lock's: unpacking is light, and need not wait for a kernel build.
exec 8>"$CACHE/.guest-debian.lock"
flock 8
if [ -e "$OUT/.done" ]; then echo "$IMG" >&3; exit 0; fi

log "guest Debian $KEY: $(echo "$closure" | wc -l) packages for $GUEST_DEBS"
mkdir -p "$DL/debs"
want=()
while read -r name ver arch; do
	# The file name apt gives it: NAME_VERSION_ARCH.deb, the epoch's colon as %3a.
	f="$DL/debs/${name}_${ver/:/%3a}_$arch.deb"
	[ -e "$f" ] || want+=("$name:$arch=$ver")
done <<<"$closure"
if [ ${#want[@]} -gt 0 ]; then
	log "guest Debian $KEY: downloading ${#want[@]} .debs"
	(cd "$DL/debs" && apt-get download -qq "${APT[@]}" "${want[@]}") ||
		die "apt-get download failed for some of: ${want[*]}"
fi

sdk=()
for d in $SDK_DEBS; do
	f="$DL/debs/${d%%=*}_${d#*=}_arm64.deb"
	[ -e "$f" ] || (cd "$DL/debs" && apt-get download -qq "${APT[@]}" "${d%%=*}:arm64=${d#*=}") ||
		die "apt-get download failed for $d (arm64)"
	sdk+=("$f")
done

rm -rf "$OUT"; mkdir -p "$OUT/root" "$OUT/sdk"
for f in "${sdk[@]}"; do dpkg-deb -x "$f" "$OUT/sdk"; done
n=0
while read -r name ver arch; do
	case " $(echo $PRUNE) " in *" $name "*) continue ;; esac
	dpkg-deb -x "$DL/debs/${name}_${ver/:/%3a}_$arch.deb" "$OUT/root"
	n=$((n + 1))
done <<<"$closure"
# No documentation, manual pages or translations: nothing in the guest reads them.
rm -rf "$OUT/root/usr/share/doc" "$OUT/root/usr/share/man" "$OUT/root/usr/share/locale" \
	"$OUT/root/usr/share/info" "$OUT/root/usr/share/lintian"
find "$OUT/root" -name '*.a' -delete   # static libraries (libfabric-dev's): nothing links there
# The names the maintainer scripts would have made (update-alternatives): mpirun and mpicc's.
ln -sf mpirun.openmpi "$OUT/root/usr/bin/mpirun"
ln -sf mpiexec.openmpi "$OUT/root/usr/bin/mpiexec"
echo "$closure" >"$OUT/packages.txt"
size=$(du -sm "$OUT/root" | cut -f1)
# Room for ext4's metadata (a quarter more), no journal: the guests mount it read-only.
mkfs.ext4 -q -F -L exanest-debian -O ^has_journal -E root_owner=0:0 -d "$OUT/root" \
	"$IMG.tmp" "$((size * 5 / 4 + 16))M" >/dev/null || die "mkfs.ext4 -d failed for $OUT/root"
mv "$IMG.tmp" "$IMG"
touch "$OUT/.done"
log "guest Debian $KEY: $n packages unpacked, $size MiB, image $IMG"
echo "$IMG" >&3
