#!/usr/bin/env python3
"""A small host-side switch for the engines' links: one unix-domain socket per port, each the
other end of a guest's `-netdev stream,server=off` (scripts/run-nodes.py --nodes N > 2).

Usage: exanest-switch.py [--drop-ppm N] [--corrupt-ppm N] [--delay-us N] [--jitter-us N]
                         [--seed S] SOCKET...

Frames are QEMU's stream framing: a 4-byte big-endian length, then the packet. The switch
learns which node sits behind which port from the source field of the packets it receives
(bytes 4-5 of the ExaNeSt header, Documentation/network.rst) and forwards each packet to its
destination node's port (bytes 6-7), or to every other port while that node is not learnt yet.
A frame too short to carry a header is dropped. On the way, per packet and seeded:
  --drop-ppm     packets dropped, per million;
  --corrupt-ppm  packets with one bit flipped, per million (the receiver's CRC32C drops them);
  --delay-us     a fixed delay added to every packet;
  --jitter-us    a random extra delay of up to this much: packets overtake each other.
On SIGTERM or SIGINT it prints its counters (one JSON line) and exits.
"""
import argparse
import asyncio
import json
import os
import random
import signal
import struct
import sys


class Switch:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.ports = {}        # port index -> StreamWriter
        self.where = {}        # node id -> port index
        self.cnt = dict(frames=0, forwarded=0, flooded=0, dropped=0, corrupted=0, runts=0)

    def deliver(self, port, frame):
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
        delay = (a.delay_us + (self.rng.randrange(a.jitter_us + 1) if a.jitter_us else 0)) / 1e6
        for t in targets:
            if delay:
                loop.call_later(delay, self.deliver, t, frame)
            else:
                self.deliver(t, frame)

    async def serve_port(self, i, reader, writer):
        self.ports[i] = writer
        try:
            while True:
                n = struct.unpack(">I", await reader.readexactly(4))[0]
                self.forward(i, await reader.readexactly(n))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if self.ports.get(i) is writer:
                del self.ports[i]
            writer.close()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sockets", nargs="+")
    ap.add_argument("--drop-ppm", type=int, default=0)
    ap.add_argument("--corrupt-ppm", type=int, default=0)
    ap.add_argument("--delay-us", type=int, default=0)
    ap.add_argument("--jitter-us", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
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
