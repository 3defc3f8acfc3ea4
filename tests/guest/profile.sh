# make profile (scripts/profile.sh), sourced by /init via exanest.run=/usr/share/exanest/profile.sh:
# one exanest-bench run with EXANEST_PROF set, which marks the spans it times for the host's
# instruction profiler (the insprof TCG plugin), then the kernel's text symbols, module's
# included, for the host to name the profile's addresses. Kernel command line:
# exanest.prof=BENCH,ARG,... (commas for spaces).
prof=fault-service
for arg in $(cat /proc/cmdline); do
	case "$arg" in exanest.prof=*) prof=${arg#exanest.prof=} ;; esac
done
insmod /lib/exanest_dma.ko || exit 1
EXANEST_PROF=1 exanest-bench $(echo "$prof" | tr , ' ') ||
	echo "{\"bench\": \"$prof\", \"error\": \"exit $?\"}"
echo PROFILE-KSYMS-BEGIN
grep ' [tTwW] ' /proc/kallsyms
echo PROFILE-KSYMS-END
rmmod exanest_dma
