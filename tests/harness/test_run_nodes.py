"""Self-tests of scripts/run-nodes.py with a stand-in for QEMU (a process that makes the socket
its -netdev names, writes its pid and waits): killed, the launcher kills every guest it started,
although each runs in a session of its own (two left over from an interrupted make nodes once
ran for half an hour and slowed every later build)."""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_NODES = os.path.join(TOP, "scripts", "run-nodes.py")

FAKE_QEMU = textwrap.dedent("""\
    #!/usr/bin/env python3
    import os, sys, time
    for a in sys.argv:
        if "addr.path=" in a and "server=on" in a:
            open(a.split("addr.path=")[1].split(",")[0], "w").close()
    with open(os.path.join(os.environ["FAKE_PIDS"], str(os.getpid())), "w") as f:
        f.write(os.environ.get("NODE", "?"))
    print("fake guest up", flush=True)
    time.sleep(600)
    """)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone too: its parent (run-qemu.sh's exec, so the launcher) did not reap it.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


class RunNodes(unittest.TestCase):
    def launch(self, nodes):
        d = tempfile.mkdtemp(prefix="run-nodes-test.")
        pids = os.path.join(d, "pids")
        os.mkdir(pids)
        qemu = os.path.join(d, "qemu")
        with open(qemu, "w") as f:
            f.write(FAKE_QEMU)
        os.chmod(qemu, 0o755)
        for name in ("kernel", "initrd"):
            open(os.path.join(d, name), "w").close()
        env = dict(os.environ, QEMU=qemu, KERNEL=os.path.join(d, "kernel"),
                   INITRD=os.path.join(d, "initrd"), FAKE_PIDS=pids)
        p = subprocess.Popen([sys.executable, RUN_NODES, "--nodes", str(nodes), "--logs",
                              os.path.join(d, "logs"), "nodes"], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while len(os.listdir(pids)) < nodes:
            self.assertIsNone(p.poll(), p.stdout.read().decode() if p.poll() is not None else "")
            self.assertLess(time.monotonic(), deadline, "the fake guests did not start")
            time.sleep(0.05)
        guests = [int(x) for x in os.listdir(pids)]
        self.addCleanup(self.reap, p, guests)
        return p, guests

    @staticmethod
    def reap(p, guests):
        """Whatever the test found, nothing it started stays."""
        for g in guests:
            if alive(g):
                os.kill(g, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()

    def check_killed_with(self, nodes, sig):
        p, guests = self.launch(nodes)
        self.assertTrue(all(alive(g) for g in guests))
        p.send_signal(sig)
        self.assertEqual(p.wait(timeout=10), 128 + sig)
        deadline = time.monotonic() + 5
        while any(alive(g) for g in guests) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [g for g in guests if alive(g)]
        self.assertEqual(left, [], f"guests left running after {signal.Signals(sig).name}")

    def test_sigterm_kills_both_guests(self):
        self.check_killed_with(2, signal.SIGTERM)

    def test_sigint_kills_every_guest_behind_the_switch(self):
        self.check_killed_with(3, signal.SIGINT)

    def test_sighup_kills_the_guests(self):
        self.check_killed_with(2, signal.SIGHUP)


if __name__ == "__main__":
    unittest.main()
