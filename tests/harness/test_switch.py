"""Self-tests of scripts/exanest-switch.py, run as a process on real unix sockets: it learns
nodes and forwards by destination, and its drop, corruption, duplication and jitter do what its
counters say."""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import importlib.util

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWITCH = os.path.join(TOP, "scripts", "exanest-switch.py")
spec = importlib.util.spec_from_file_location("pcap", os.path.join(TOP, "scripts", "exanest-pcap.py"))
pcap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pcap)


def frame(src, dst, seq, size=100):
    """A packet as far as the switch reads it: source and destination at bytes 4-7, then a
    sequence number to recognise it by."""
    body = struct.pack("<HHHHI", 0xEDA0, 1, src, dst, seq)
    return body + bytes(size - len(body))


class Port:
    """One guest's end of a switch port: QEMU's stream framing (4-byte big-endian length)."""

    def __init__(self, path):
        for _ in range(200):
            try:
                self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.s.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self.s.close()
                time.sleep(0.02)
        else:
            raise RuntimeError(f"no switch at {path}")
        self.buf = b""

    def send(self, f):
        self.s.sendall(struct.pack(">I", len(f)) + f)

    def recv_all(self, quiet=0.5):
        """Every frame that arrives until none came for `quiet` seconds."""
        self.s.settimeout(quiet)
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    break
                self.buf += d
        except socket.timeout:
            pass
        out = []
        while len(self.buf) >= 4:
            n = struct.unpack(">I", self.buf[:4])[0]
            if len(self.buf) < 4 + n:
                break
            out.append(self.buf[4:4 + n])
            self.buf = self.buf[4 + n:]
        return out


class Switch(unittest.TestCase):
    def run_switch(self, *opts, ports=3):
        d = tempfile.mkdtemp(prefix="exanest-switch-test.")
        paths = [os.path.join(d, f"p{i}") for i in range(ports)]
        p = subprocess.Popen([sys.executable, SWITCH, *opts, *paths], stdout=subprocess.PIPE,
                             text=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        ports = [Port(x) for x in paths]
        for x in ports:
            self.addCleanup(x.s.close)
        return p, ports

    def stop(self, p):
        p.terminate()
        out, _ = p.communicate(timeout=10)
        p.stdout.close()
        return json.loads(out.strip().splitlines()[-1])

    def connected(self, ports):
        """Wait until the switch has taken every port (connect() returns before the switch
        accepts; a frame flooded meanwhile misses the port, as a frame on a link not yet up):
        a frame from an unknown node to another, flooded from the first port, reaches all
        the others. Returns how many such frames were sent."""
        for sent in range(1, 51):
            ports[0].send(frame(200, 201, sent))
            if all(frame(200, 201, sent) in x.recv_all(0.1) for x in ports[1:]):
                return sent
        raise AssertionError("the switch did not take every port")

    def test_learns_and_forwards_by_destination(self):
        p, (a, b, c) = self.run_switch()
        warm = self.connected((a, b, c))
        a.send(frame(0, 1, 1))        # node 1 unknown: flooded to b and c
        b.send(frame(1, 0, 2))        # node 0 learnt: to a only
        c.send(frame(2, 1, 3))        # node 1 learnt from b: to b only
        a.send(b"\0\0\0")             # a runt: dropped
        # (a late copy of a warm-up frame, from node 200, is not the test's)
        fa, fb, fc = ([f for f in x.recv_all() if f[4:6] != b"\xc8\x00"] for x in (a, b, c))
        self.assertEqual([frame(1, 0, 2)], fa)
        self.assertEqual([frame(0, 1, 1), frame(2, 1, 3)], fb)
        self.assertEqual([frame(0, 1, 1)], fc)
        cnt = self.stop(p)["switch"]
        self.assertEqual((4 + warm, 1 + warm, 2, 1),
                         (cnt["frames"], cnt["flooded"], cnt["forwarded"], cnt["runts"]))

    def test_port_nodes_are_fixed_at_set_up(self):
        """--port-nodes (run-nodes.py: port i is node i): a frame claiming another port's node
        is dropped (spoofed), one to a node no port has is dropped (unroutable), nothing is
        flooded, and honest frames go straight to their node's port (Transport v2, defect
        12: the switch used to learn first come, first served)."""
        p, (a, b, c) = self.run_switch("--port-nodes", "0,1,2")
        warm = 0
        for x, y, src, dst in ((a, b, 0, 1), (b, c, 1, 2)):   # until b and c are taken
            for _ in range(50):
                warm += 1
                x.send(frame(src, dst, 1000 + warm))
                if frame(src, dst, 1000 + warm) in y.recv_all(0.1):
                    break
            else:
                self.fail("the switch did not take every port")
        c.send(frame(0, 1, 1))        # port 2 claims node 0: dropped
        a.send(frame(0, 7, 2))        # node 7 is behind no port: dropped
        a.send(frame(0, 2, 3))        # straight to c
        b.send(frame(1, 0, 4))        # straight to a
        # (the warm-up frames, numbered from 1001, are not the test's)
        fa, fb, fc = ([f for f in x.recv_all() if struct.unpack_from("<I", f, 8)[0] < 1000]
                      for x in (a, b, c))
        self.assertEqual([frame(1, 0, 4)], fa)
        self.assertEqual([], fb)
        self.assertEqual([frame(0, 2, 3)], fc)
        cnt = self.stop(p)["switch"]
        self.assertEqual((1, 1, 0), (cnt["spoofed"], cnt["unroutable"], cnt["flooded"]))
        self.assertEqual(4 + warm, cnt["frames"])

    def test_port_nodes_must_name_each_port_once(self):
        d = tempfile.mkdtemp(prefix="exanest-switch-test.")
        paths = [os.path.join(d, f"p{i}") for i in range(3)]
        for bad in ("0,0,1", "0,1", "0,x,2", "0,1,70000"):
            r = subprocess.run([sys.executable, SWITCH, "--port-nodes", bad, *paths],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(2, r.returncode, bad)
            self.assertIn("--port-nodes", r.stderr, bad)

    def test_impairments_match_the_counters(self):
        n = 2000
        p, (a, b) = self.run_switch("--drop-ppm", "50000", "--corrupt-ppm", "50000", "--dup-ppm",
                                    "50000", "--jitter-us", "2000", "--seed", "5", ports=2)
        b.send(frame(1, 0, 0))        # learn node 1
        a.recv_all(0.2)
        for i in range(1, n + 1):
            a.send(frame(0, 1, i))
        got = b.recv_all(1.0)
        cnt = self.stop(p)["switch"]
        # Every counter moved, and what arrived is what they say.
        for k in ("dropped", "corrupted", "duplicated", "reordered"):
            self.assertGreater(cnt[k], 0, k)
        self.assertEqual(n - cnt["dropped"] + cnt["duplicated"], len(got))
        damaged = [f for f in got if f not in {frame(0, 1, i) for i in range(1, n + 1)}]
        # (A flipped bit can turn a frame into another valid one, so at most, not exactly.)
        self.assertLessEqual(len(damaged), 2 * cnt["corrupted"])
        self.assertGreater(len(damaged), 0)
        seqs = [struct.unpack_from("<I", f, 8)[0] for f in got if f not in damaged]
        self.assertNotEqual(sorted(seqs), seqs, "jitter reordered nothing")
        self.assertGreater(len(seqs) - len(set(seqs)), 0, "no duplicate arrived")

    def test_reorder_holds_back_only_some(self):
        n = 1000
        p, (a, b) = self.run_switch("--jitter-us", "20000", "--reorder-ppm", "20000", "--seed",
                                    "3", ports=2)
        b.send(frame(1, 0, 0))
        a.recv_all(0.2)
        for i in range(1, n + 1):
            a.send(frame(0, 1, i))
            if i % 100 == 0:
                time.sleep(0.01)
        got = [struct.unpack_from("<I", f, 8)[0] for f in b.recv_all(1.0)]
        cnt = self.stop(p)["switch"]
        self.assertEqual(sorted(got), list(range(1, n + 1)))
        # About 2 % held back, each passed by the ones behind it: far from all reordered.
        self.assertGreater(cnt["reordered"], 0)
        self.assertLess(cnt["reordered"], n // 2)

    def test_hostile_packets_never_carry_the_key(self):
        # Honest WRITEs from node 0 to node 1 with key K; the switch adds 3 hostile packets
        # after each. Every hostile one that would pass the receiver's checks on its face
        # (magic, version, checksum) names another key, unless it is an exact replay.
        key = 0x1234_5678_0000_0003
        honest = []
        for i in range(40):
            hdr = pcap.HDR.pack(0xEDA0, pcap.VERSION, 1, 0, 1, 7, 100, i, 0, key, 0x7000_0000, 40 * 4096,
                                i * 4096, 4096, 0, 0)
            payload = bytes([i]) * 4096
            honest.append(hdr[:60] + struct.pack("<I", pcap.crc32c(hdr[:60] + bytes(4) + payload))
                          + payload)
        p, (a, b) = self.run_switch("--hostile-ppm", "3000000", "--seed", "9", ports=2)
        b.send(frame(1, 0, 0, 16))    # too short to be answered with hostile packets
        a.recv_all(0.2)
        for f in honest:
            a.send(f)
        got = b.recv_all(1.0)
        cnt = self.stop(p)["switch"]
        self.assertEqual(120, cnt["hostile"])
        self.assertEqual(160, len(got))
        valid = 0
        for f in got:
            d = pcap.decode(f, len(f))
            if f in honest or isinstance(d, str) or d.get("crc") != "ok":
                continue
            valid += 1
            self.assertNotEqual(key, struct.unpack_from("<Q", f, 24)[0], d)
        self.assertGreater(valid, 20)
        # The honest packets all arrived, in order (replays of them come later).
        first = []
        for f in got:
            if f in honest and honest.index(f) not in first:
                first.append(honest.index(f))
        self.assertEqual(list(range(40)), first)


if __name__ == "__main__":
    unittest.main()
