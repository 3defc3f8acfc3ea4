#!/usr/bin/env python3
"""A small host-side switch for the engines' links: one unix-domain socket per port, each the
other end of a guest's `-netdev stream,server=off` (scripts/run-nodes.py --nodes N > 2).

Usage: exanest-switch.py [--port-nodes N,N...] [--drop-ppm N] [--corrupt-ppm N] [--dup-ppm N]
                         [--delay-us N] [--jitter-us N] [--reorder-ppm N] [--hostile-ppm N]
                         [--seed S] SOCKET...

Frames are QEMU's stream framing: a 4-byte big-endian length, then the packet. The switch
forwards each packet to its destination node's port (bytes 6-7 of the ExaNeSt header,
Documentation/network.rst). Which node sits behind which port:
  --port-nodes   set up by the admin, once: the node id of each port, in SOCKET order
                 (scripts/run-nodes.py: port i is node i). A frame whose source field (bytes
                 4-5) is not its port's node is dropped (spoofed), as is one to a node no port
                 has (unroutable): a node cannot claim another's id, nor take its traffic.
  without it     learnt from the source field of the packets received, first come, first
                 served, and flooded to every other port while the destination is not learnt
                 yet: any node can claim any id first (a test set-up, not a defence).
A frame too short to carry a header is dropped. On the way, per packet and seeded:
  --drop-ppm     packets dropped, per million;
  --corrupt-ppm  packets with one bit flipped, per million (the receiver's CRC32C drops them);
  --dup-ppm      packets delivered twice, per million (each copy with its own delay);
  --delay-us     a fixed delay added to every packet;
  --jitter-us    a random extra delay of up to this much: packets overtake each other;
  --reorder-ppm  with --jitter-us: only these packets, per million, get the extra delay (the
                 others pass them); without it every packet does;
  --hostile-ppm  hostile packets sent after each forwarded one, per million (more than a
                 million: several), to the same port, as a peer that forges anything would:
                 random bytes; packets with valid checksums built from the honest one with
                 its key changed and any other field forged (op, source, destination,
                 endpoint, op id, sequence, status, address, length, offset: forged ACKs,
                 NACKs and RESUMEs included); well-formed packets with random fields;
                 replays of earlier honest packets; honest ones with one bit flipped. Each
                 must be dropped or refused: none carries a key the receiver granted, except
                 the exact replays, which are duplicates.
On SIGTERM or SIGINT it prints its counters (one JSON line) and exits: frames received,
forwarded, flooded (destination not learnt yet), dropped, corrupted, duplicated, runts,
reordered (delivered after a frame forwarded later to the same port), hostile, spoofed and
unroutable.
"""
import argparse
import asyncio
import collections
import importlib.util
import json
import os
import random
import signal
import struct
import sys


_spec = importlib.util.spec_from_file_location(
    "exanest_pcap", os.path.join(os.path.dirname(os.path.abspath(__file__)), "exanest-pcap.py"))
pcap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pcap)


def seal(hdr, payload):
    """A packet with a valid checksum: `hdr` (64 bytes, its CRC field ignored), then `payload`."""
    hdr = bytes(hdr[:60]) + bytes(4)
    return hdr[:60] + struct.pack("<I", pcap.crc32c(hdr + payload)) + payload


def hostile(rng, honest, history):
    """One hostile packet, after the honest packet `honest` (see --hostile-ppm)."""
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 4200))
    if kind == 3 and history:
        return rng.choice(history)
    if kind == 4:
        b = bytearray(honest)
        bit = rng.randrange(len(b) * 8)
        b[bit // 8] ^= 1 << (bit % 8)
        return bytes(b)
    f = list(pcap.HDR.unpack_from(honest))
    # magic, version, op, src, dst, ep, op_id, seq, status, rkey, addr, len, offset, plen, span, crc
    if kind == 2:
        f[2] = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 255])
        f[3], f[4] = rng.choice([f[3], f[4], 63, 65535]), rng.choice([f[4], f[3], 2, 65535])
        f[5] = rng.choice([f[5], 0, 255, 256, 2**32 - 1])
        f[6] = rng.randrange(2**32)
    # Forge some fields, and always the key: a different key, which the receiver never granted.
    for i in rng.sample(range(2, 13), rng.randrange(0, 5)):
        if i == 2:
            f[2] = rng.choice([1, 2, 3, 4, 5, 6, 7, 0, 9])
        elif i in (3, 4):
            f[3], f[4] = f[4], f[3]       # an answer forged from the other side
        elif i == 8:
            f[8] = rng.choice([0, 1, 2, 3, 4, -14, -13, -4096, 2**31 - 1])
        elif i in (10, 11, 12):
            f[i] = rng.choice([0, f[i] + 4096, f[i] - 1, 2**64 - 4096, rng.randrange(2**64)]) % 2**64
        else:
            f[i] = rng.randrange(2**32)
    f[9] ^= 1 << rng.randrange(64)
    payload = honest[pcap.HDR.size:]
    if kind == 2 or rng.randrange(4) == 0:
        payload = rng.randbytes(rng.choice([0, 1, 100, 4096, 5000]))
    f[13] = len(payload) if rng.randrange(8) else rng.randrange(65536)
    f[14], f[15] = (f[14] if rng.randrange(8) else rng.randrange(65536)), 0
    return seal(pcap.HDR.pack(*f), payload)


class Switch:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.ports = {}        # port index -> StreamWriter
        self.where = {}        # node id -> port index
        self.cnt = dict(frames=0, forwarded=0, flooded=0, dropped=0, corrupted=0, duplicated=0,
                        runts=0, reordered=0, hostile=0, spoofed=0, unroutable=0)
        # --port-nodes: port -> node, and where each node is, fixed at set-up.
        self.node_of = dict(enumerate(a.port_nodes)) if a.port_nodes else None
        if self.node_of:
            self.where = {n: p for p, n in self.node_of.items()}
        self.hrng = random.Random(a.seed + 1)
        self.history = collections.deque(maxlen=256)
        self.sent = {}         # port -> frames forwarded to it so far
        self.last = {}         # port -> the latest of those delivered

    def deliver(self, port, frame, n=None):
        if n is not None:
            if n < self.last.get(port, -1):
                self.cnt["reordered"] += 1
            self.last[port] = max(n, self.last.get(port, -1))
        w = self.ports.get(port)
        if w is not None and not w.is_closing():
            w.write(struct.pack(">I", len(frame)) + frame)

    def forward(self, src_port, frame):
        a, loop = self.a, asyncio.get_running_loop()
        self.cnt["frames"] += 1
        if len(frame) < 8:
            self.cnt["runts"] += 1
            return
        src, dst = struct.unpack_from("<HH", frame, 4)
        if self.node_of is not None:
            if self.node_of.get(src_port) != src:
                self.cnt["spoofed"] += 1
                return
            if dst not in self.where:
                self.cnt["unroutable"] += 1
                return
        self.where.setdefault(src, src_port)
        if a.drop_ppm and self.rng.randrange(1000000) < a.drop_ppm:
            self.cnt["dropped"] += 1
            return
        if a.corrupt_ppm and self.rng.randrange(1000000) < a.corrupt_ppm:
            b = bytearray(frame)
            bit = self.rng.randrange(len(b) * 8)
            b[bit // 8] ^= 1 << (bit % 8)
            frame = bytes(b)
            self.cnt["corrupted"] += 1
        if dst in self.where:
            targets = [self.where[dst]]
            self.cnt["forwarded"] += 1
        else:
            targets = [p for p in self.ports if p != src_port]
            self.cnt["flooded"] += 1
        if a.hostile_ppm and len(frame) >= pcap.HDR.size:
            n = a.hostile_ppm // 1000000 + (self.hrng.randrange(1000000) < a.hostile_ppm % 1000000)
            for _ in range(n):
                h = hostile(self.hrng, frame, self.history)
                self.cnt["hostile"] += 1
                for t in targets:
                    self.deliver(t, h)
            self.history.append(frame)
        copies = 1
        if a.dup_ppm and self.rng.randrange(1000000) < a.dup_ppm:
            copies = 2
            self.cnt["duplicated"] += 1
        for _ in range(copies):
            held = a.jitter_us and (not a.reorder_ppm or
                                    self.rng.randrange(1000000) < a.reorder_ppm)
            delay = (a.delay_us + (self.rng.randrange(a.jitter_us + 1) if held else 0)) / 1e6
            for t in targets:
                n = self.sent[t] = self.sent.get(t, -1) + 1
                if delay:
                    loop.call_later(delay, self.deliver, t, frame, n)
                else:
                    self.deliver(t, frame, n)

    async def serve_port(self, i, reader, writer):
        self.ports[i] = writer
        try:
            while True:
                n = struct.unpack(">I", await reader.readexactly(4))[0]
                self.forward(i, await reader.readexactly(n))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass        # the guest went, or the switch stops
        finally:
            if self.ports.get(i) is writer:
                del self.ports[i]
            writer.close()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sockets", nargs="+")
    ap.add_argument("--drop-ppm", type=int, default=0)
    ap.add_argument("--corrupt-ppm", type=int, default=0)
    ap.add_argument("--dup-ppm", type=int, default=0)
    ap.add_argument("--delay-us", type=int, default=0)
    ap.add_argument("--jitter-us", type=int, default=0)
    ap.add_argument("--reorder-ppm", type=int, default=0)
    ap.add_argument("--hostile-ppm", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port-nodes", default="",
                    help="the node id of each port, comma-separated, in SOCKET order")
    a = ap.parse_args()
    try:
        a.port_nodes = [int(x) for x in a.port_nodes.split(",")] if a.port_nodes else []
    except ValueError:
        ap.error("--port-nodes: node ids, comma-separated")
    if a.port_nodes and (len(a.port_nodes) != len(a.sockets) or
                         len(set(a.port_nodes)) != len(a.port_nodes) or
                         not all(0 <= n < 65536 for n in a.port_nodes)):
        ap.error("--port-nodes: one distinct node id (0-65535) per SOCKET")
    sw = Switch(a)
    servers = []
    for i, path in enumerate(a.sockets):
        if os.path.exists(path):
            os.unlink(path)
        servers.append(await asyncio.start_unix_server(
            lambda r, w, i=i: sw.serve_port(i, r, w), path=path))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()
    print(json.dumps(dict(switch=sw.cnt, nodes={str(k): v for k, v in sw.where.items()})),
          flush=True)
    for path in a.sockets:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
