#!/usr/bin/env python3
"""Boot N guests as N nodes, each its own QEMU process, kernel and engine, and wire their engines'
network ports over unix-domain sockets (Documentation/network.rst, "Two guests").

Usage: run-nodes.py [--nodes N] [--timeout S] [--logs DIR] [--pcap DIR] [--smp C] RUN
  RUN       what the guests run (tests/guest/init: nodes, shell, /PATH...)
  --nodes   2 (default): node 0 listens on a unix socket, node 1 connects to it
            (-netdev stream); more: every node connects to scripts/exanest-switch.py, which
            forwards by destination node and can inject loss, corruption and delay
  --timeout seconds until every guest is killed (0: none); after the first guest ends, the
            others get 120 s more
  --logs    where each node's console goes (nodeI.log); default build/logs
  --pcap    record each node's link with filter-dump: DIR/nodeI.pcap (scripts/exanest-pcap.py
            reads them)
  --pcap-maxlen  bytes kept of each packet (filter-dump's maxlen; 128 keeps the headers)
  --switch-opts  options for the switch (e.g. "--drop-ppm 10000 --seed 3"), N > 2 only
Environment: QEMU, KERNEL, INITRD, and scripts/run-qemu.sh's PLDMA_OPTS, QEMU_APPEND, QEMU_MEM.

Every guest also has a second NIC, virtio-net, 169.254.0.(I+1) on node I (name nodeI): with two
nodes a unix socket between them, with more an Ethernet hub in this launcher (EtherHub). Open
MPI's launcher and the TCP baselines use it, nothing else (Documentation/libfabric.rst). With
GUEST_DISK set (scripts/build-guest-debian.sh's image), every guest has the Debian user space.

Each guest's console is printed with a "[nI] " prefix. Guests have no other network: processes
on different nodes exchange their addresses and keys out of band through the console, as RDMA
programs do through a TCP socket or a job launcher. A guest line "GUEST-OOB J TEXT" is written,
as "TEXT", to node J's console input. When a guest ends, the guests it exchanged such lines
with read "bye", and so do the others once none of theirs is left running; a guest still running
120 s after its "bye" is killed. A line
"J: TEXT" typed into the launcher goes to node J too (exanest.run=shell: a shell per node).
Exits 0 when every guest reached GUEST-DONE, 1 otherwise.
"""
import argparse
import os
import re
import selectors
import shlex
import socket
import struct
import signal
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OOB = re.compile(r"GUEST-OOB (\d+) (.*)$")
GRACE = 120


class Node:
    def __init__(self, i, proc, log):
        self.i, self.proc, self.log = i, proc, log
        self.done = False
        self.lock = threading.Lock()
        self.partners = set()   # the nodes it exchanged GUEST-OOB lines with
        self.bye_at = None      # when it was told "bye"

    def send(self, text):
        with self.lock:
            try:
                self.proc.stdin.write((text + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass


class EtherHub(threading.Thread):
    """An Ethernet hub for the guests' second NICs: one listening unix socket per port, each
    QEMU's -netdev stream connecting to its own; every frame (QEMU's stream framing: a 4-byte
    big-endian length, then the frame) goes out of every other port. Only the launcher's and the
    TCP baseline's traffic crosses it."""

    def __init__(self, paths):
        super().__init__(daemon=True)
        self.sel = selectors.DefaultSelector()
        self.conns = {}   # connected socket -> bytes received and not yet forwarded
        for p in paths:
            ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            ls.bind(p)
            ls.listen(1)
            self.sel.register(ls, selectors.EVENT_READ, None)

    def run(self):
        while True:
            for key, _ in self.sel.select():
                if key.data is None:
                    c, _ = key.fileobj.accept()
                    self.conns[c] = b""
                    self.sel.register(c, selectors.EVENT_READ, True)
                    continue
                c = key.fileobj
                try:
                    data = c.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(c)
                    del self.conns[c]
                    c.close()
                    continue
                buf = self.conns[c] + data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                    n = 4 + struct.unpack(">I", buf[:4])[0]
                    for o in list(self.conns):
                        if o is not c:
                            try:
                                o.sendall(buf[:n])
                            except OSError:
                                pass
                    buf = buf[n:]
                self.conns[c] = buf


def pump(node, nodes, out_lock):
    """Copy a node's console to its log and to stdout, and relay its GUEST-OOB lines."""
    with open(node.log, "wb") as log:
        for raw in node.proc.stdout:
            log.write(raw)
            log.flush()
            line = raw.decode(errors="replace").rstrip("\r\n")
            if "GUEST-DONE" in line:
                node.done = True
            with out_lock:
                sys.stdout.write(f"[n{node.i}] {line}\n")
                sys.stdout.flush()
            m = OOB.search(line)
            if m and int(m.group(1)) < len(nodes) and int(m.group(1)) != node.i:
                to = nodes[int(m.group(1))]
                with out_lock:
                    node.partners.add(to.i)
                    to.partners.add(node.i)
                to.send(m.group(2))


def keyboard(nodes):
    """Lines "J: TEXT" on the launcher's input go to node J."""
    for raw in sys.stdin:
        m = re.match(r"\s*(\d+):\s?(.*)$", raw.rstrip("\n"))
        if m and int(m.group(1)) < len(nodes):
            nodes[int(m.group(1))].send(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=0)
    ap.add_argument("--logs", default=os.path.join(TOP, "build", "logs"))
    ap.add_argument("--pcap")
    ap.add_argument("--pcap-maxlen", type=int, default=65536)
    ap.add_argument("--smp", default="1")
    ap.add_argument("--switch-opts", default="")
    a = ap.parse_args()
    if not 2 <= a.nodes <= 64:
        ap.error("--nodes: 2 to 64 (the engine's node ids)")
    for v in ("QEMU", "KERNEL", "INITRD"):
        if not os.environ.get(v):
            ap.error(f"{v} is not set")
    os.makedirs(a.logs, exist_ok=True)
    if a.pcap:
        os.makedirs(a.pcap, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="exanest-nodes.")
    switch = None
    if a.nodes == 2:
        sock = os.path.join(tmp, "link")
        netdevs = [f"stream,server=on,addr.type=unix,addr.path={sock}",
                   f"stream,server=off,reconnect-ms=100,addr.type=unix,addr.path={sock}"]
    else:
        socks = [os.path.join(tmp, f"port{i}") for i in range(a.nodes)]
        # Port i is node i, set up once: no node can claim another's id (the switch drops it).
        switch = subprocess.Popen([sys.executable, os.path.join(TOP, "scripts", "exanest-switch.py"),
                                   "--port-nodes", ",".join(str(i) for i in range(a.nodes)),
                                   *shlex.split(a.switch_opts), *socks])
        for s in socks:
            while not os.path.exists(s):
                if switch.poll() is not None:
                    sys.exit(f"run-nodes: the switch exited ({switch.returncode})")
                time.sleep(0.05)
        netdevs = [f"stream,server=off,reconnect-ms=100,addr.type=unix,addr.path={s}"
                   for s in socks]
    # The second NICs: a socket between two nodes, a hub between more.
    if a.nodes == 2:
        eth = os.path.join(tmp, "eth")
        ethdevs = [f"stream,server=on,addr.type=unix,addr.path={eth}",
                   f"stream,server=off,reconnect-ms=100,addr.type=unix,addr.path={eth}"]
    else:
        eths = [os.path.join(tmp, f"eth{i}") for i in range(a.nodes)]
        EtherHub(eths).start()
        ethdevs = [f"stream,server=off,reconnect-ms=100,addr.type=unix,addr.path={e}"
                   for e in eths]
    nodes, out_lock = [], threading.Lock()

    def stop(signum, _frame):
        """Killed (make interrupted, or a timeout around it): the guests go too. Each QEMU is
        in a session of its own, so nothing else would stop it: two left over once ran for half
        an hour."""
        for n in nodes:
            if n.proc.poll() is None:
                os.killpg(n.proc.pid, 9)
        if switch:
            switch.terminate()
        sys.exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    for i in range(a.nodes):
        env = dict(os.environ, NODE=str(i), NETDEV=netdevs[i], ETHDEV=ethdevs[i], TIMEOUT="0",
                   QEMU_SMP=a.smp,
                   QEMU_APPEND=f"exanest.nodes={a.nodes} " + os.environ.get("QEMU_APPEND", ""))
        if a.pcap:
            env["PCAP"] = os.path.join(a.pcap, f"node{i}.pcap") + f",maxlen={a.pcap_maxlen}"
        proc = subprocess.Popen([os.path.join(TOP, "scripts", "run-qemu.sh"), a.run], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        nodes.append(Node(i, proc, os.path.join(a.logs, f"node{i}.log")))
        if i == 0 and a.nodes == 2:
            # The listening side first, so that the other connects at once.
            for _ in range(200):
                if all(os.path.exists(d.split("addr.path=")[1]) for d in (netdevs[0], ethdevs[0])) \
                        or proc.poll() is not None:
                    break
                time.sleep(0.05)
    threads = [threading.Thread(target=pump, args=(n, nodes, out_lock), daemon=True)
               for n in nodes]
    for t in threads:
        t.start()
    threading.Thread(target=keyboard, args=(nodes,), daemon=True).start()
    t0 = time.monotonic()
    while any(n.proc.poll() is None for n in nodes):
        now = time.monotonic()
        running = {n.i for n in nodes if n.proc.poll() is None}
        if len(running) < len(nodes):
            with out_lock:
                alone = all(not (nodes[i].partners & running) for i in running)
                for i in running:
                    n = nodes[i]
                    if n.bye_at is None and (alone or n.partners - running):
                        n.bye_at = now
                        n.send("bye")
        late = [n for n in nodes if n.i in running and n.bye_at is not None
                and now - n.bye_at > GRACE]
        if (a.timeout and now - t0 > a.timeout) or late:
            for n in nodes:
                if n.proc.poll() is None:
                    print(f"run-nodes: node {n.i} killed after {now - t0:.0f} s", flush=True)
                    os.killpg(n.proc.pid, 9)
            break
        time.sleep(0.2)
    for n in nodes:
        n.proc.wait()
    for t in threads:
        t.join(5)
    if switch:
        switch.terminate()
        switch.wait()
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    bad = [n.i for n in nodes if not n.done]
    if bad:
        print(f"run-nodes: node(s) {bad} did not reach GUEST-DONE", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
