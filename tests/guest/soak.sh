# Long stress runs (sourced by /init with exanest.run=/usr/share/exanest/soak.sh; `make soak`):
# the deregistration races with EXANEST_RACE_ITER iterations each (kernel argument
# exanest.race_iter, default 100000) and the ioctl fuzzer with exanest.fuzz_calls calls (default
# 1000000), on the test kernel (KASAN, lockdep). The host scans the console as for make check.
iter=100000 calls=1000000
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	exanest.race_iter=*) iter=${arg#exanest.race_iter=} ;;
	exanest.fuzz_calls=*) calls=${arg#exanest.fuzz_calls=} ;;
	esac
done
insmod /lib/exanest_dma.ko || echo "GUEST-TEST: not ok driver-load"
for t in race fuzz; do
	t0=$(cut -d' ' -f1 /proc/uptime)
	if [ $t = race ]; then EXANEST_RACE_ITER=$iter exanest-race; else exanest-fuzz -n "$calls"; fi
	echo "GUEST-TIME: exanest-$t $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s"
done
rmmod exanest_dma
echo "GUEST-DMESG-BEGIN"
dmesg
echo "GUEST-DMESG-END"
