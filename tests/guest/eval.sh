# Evaluation runs (sourced by /init via exanest.run=/usr/share/exanest/eval.sh). Kernel command
# line: exanest.runs=N (default 5), exanest.quick=1 for the short smoke version.
# exanest.incast=1: the incast boot instead (make evaluate's second, with nine engines).
# exanest.mpiwall=1: libfabric and MPI on the host's clock instead (its third; eval-mpi.sh).
# exanest.qfdb=1: fault service on the MMU-500 instead (the QFDB machine: run-qemu.sh
# PLATFORM=mmu500), with the CPU fault it is measured against, in the same runs.
runs=5 quick= incast= mpiwall= qfdb=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	exanest.runs=*) runs=${arg#exanest.runs=} ;;
	exanest.quick=1) quick=--quick ;;
	exanest.incast=1) incast=1 ;;
	exanest.mpiwall=1) mpiwall=1 ;;
	exanest.qfdb=1) qfdb=1 ;;
	esac
done
insmod /lib/exanest_dma.ko || exit 1
if [ -n "$mpiwall" ]; then
	EVAL_MPI_PART=wall EVAL_RUNS=$runs
	. /usr/share/exanest/eval-mpi.sh
	rmmod exanest_dma
	return 0 2>/dev/null || exit 0
fi
if [ -n "$qfdb" ]; then
	i=1
	while [ "$i" -le "$runs" ]; do
		echo "{\"run\": $i}"
		for b in fault-service cpu-fault; do
			exanest-bench $b $quick || echo "{\"bench\": \"$b\", \"error\": \"exit $?\"}"
		done
		i=$((i + 1))
	done
	rmmod exanest_dma
	return 0 2>/dev/null || exit 0
fi
if [ -n "$incast" ]; then
	i=1
	while [ "$i" -le "$runs" ]; do
		exanest-bench net-incast $quick || echo "{\"bench\": \"net-incast\", \"error\": \"exit $?\"}"
		i=$((i + 1))
	done
	rmmod exanest_dma
	return 0 2>/dev/null || exit 0
fi
# The engine's own description, bandwidth and latency included (its BANDWIDTH and LATENCY
# registers): one JSON line that tests/eval/report.py quotes. No line, no report.
cat /sys/kernel/debug/exanest-dma0/engine ||
	echo '{"engine": null, "error": "no /sys/kernel/debug/exanest-dma0/engine"}'
echo "EVAL-META: kernel $(uname -r), $(nproc) cpus, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB, runs $runs${quick:+ (quick)}"
i=1
while [ "$i" -le "$runs" ]; do
	echo "{\"run\": $i}"
	exanest-bench all $quick || echo "{\"bench\": \"all\", \"error\": \"exit $?\"}"
	# Moving a queue between contexts needs more queues than contexts: the driver with one.
	rmmod exanest_dma && insmod /lib/exanest_dma.ko contexts=1 || exit 1
	exanest-bench queue-move $quick || echo "{\"bench\": \"queue-move\", \"error\": \"exit $?\"}"
	rmmod exanest_dma && insmod /lib/exanest_dma.ko || exit 1
	# The network: the guest's two engines, cabled back to back.
	for b in net net-cold net-small-cold net-many net-loss net-mailbox net-pingpong; do
		exanest-bench $b $quick || echo "{\"bench\": \"$b\", \"error\": \"exit $?\"}"
	done
	# libfabric over the same two engines, where the Debian disk is attached: 1 MiB.
	EVAL_MPI_PART=icount
	[ -n "$quick" ] || . /usr/share/exanest/eval-mpi.sh
	i=$((i + 1))
done
# Once, at full size (1 GiB each, too long to repeat): RLIMIT_MEMLOCK as user nobody, and
# transparent huge pages against pinning while khugepaged runs. In the last run's block.
for b in memlock thp; do
	exanest-bench $b $quick || echo "{\"bench\": \"$b\", \"error\": \"exit $?\"}"
done
rmmod exanest_dma
