#!/usr/bin/env python3
"""Read a pcap of an engine's link (QEMU's filter-dump: scripts/run-nodes.py --pcap) and decode
the ExaNeSt packet header of every packet (Documentation/network.rst, "Packet format").

Usage: exanest-pcap.py FILE [--summary] [--op OP ...] [--limit N]
  one line per packet: time (µs since the file's first packet, on the recording node's
  QEMU_CLOCK_VIRTUAL, which follows host time without -icount), direction, op and fields, payload length and checksum (ok, BAD, or
  "cut" when the capture kept less than the packet: filter-dump's maxlen);
  --summary  per op: packets, payload bytes; NACKs by status; malformed packets.
filter-dump writes linktype 1 (Ethernet) whatever the frames are; ours carry no Ethernet header,
so generic tools misread them: this script is the reader.
"""
import argparse
import errno
import struct
import sys
from collections import Counter

HDR = struct.Struct("<HBBHHIIIiQQQQHHI")
MAGIC, VERSION = 0xEDA0, 2
OPS = {1: "WRITE", 2: "READ_REQ", 3: "READ_RESP", 4: "ACK", 5: "NACK", 6: "RESUME", 7: "MAILBOX",
       8: "WRITE_IMM", 9: "ABORT"}
NACK = {1: "FAULT", 2: "NOT_READY", 3: "SEQUENCE", 4: "RNR", 5: "AHEAD"}


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def records(path):
    """(time in µs, captured bytes, original length) of each packet."""
    with open(path, "rb") as f:
        g = f.read(24)
        if len(g) < 24:
            raise SystemExit(f"{path}: not a pcap file")
        magic = struct.unpack("<I", g[:4])[0]
        end = "<" if magic == 0xA1B2C3D4 else ">" if magic == 0xD4C3B2A1 else None
        if end is None:
            raise SystemExit(f"{path}: not a pcap file (magic {magic:#x})")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, usec, incl, orig = struct.unpack(end + "IIII", h)
            yield sec * 1000000 + usec, f.read(incl), orig


def decode(data, orig):
    """The header's fields as a dict, or a reason why the packet is malformed."""
    if len(data) < HDR.size:
        return f"short packet ({orig} bytes)"
    (magic, version, op, src, dst, ep, op_id, seq, status, rkey, addr, length, offset, plen,
     span, crc) = HDR.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        return f"magic {magic:#x} version {version}"
    if orig != HDR.size + plen:
        return f"payload_len {plen} in a {orig}-byte packet"
    if len(data) < orig:
        check = "cut"
    else:
        check = "ok" if crc32c(data[:60] + b"\0\0\0\0" + data[64:orig]) == crc else "BAD"
    return dict(op=OPS.get(op, f"op{op}"), src=src, dst=dst, ep=ep, op_id=op_id, seq=seq,
                status=status, rkey=rkey, addr=addr, len=length, offset=offset, plen=plen,
                span=span, crc=check)


def status(st):
    if st in NACK:
        return NACK[st]
    return f"-{errno.errorcode.get(-st, -st)}" if st < 0 else str(st)


def line(t, p):
    s = (f"{t:>12} n{p['src']}>n{p['dst']} {p['op']:<9} ep {p['ep']} op {p['op_id']:#x} "
         f"seq {p['seq']} off {p['offset']}")
    if p["op"] in ("WRITE", "WRITE_IMM", "READ_REQ", "READ_RESP", "ABORT"):
        s += f" of {p['len']} @{p['addr']:#x} rkey {p['rkey']:#x}"
    if p["op"] == "WRITE_IMM":
        s += f" imm {p['status'] & 0xffffffff:#x}"
    if p["op"] == "NACK":
        s += f" status {status(p['status'])}"
    return s + f" payload {p['plen']} crc {p['crc']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--op", action="append", help="only these ops (WRITE, NACK, ...)")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    ops, payload, nacks, bad, shown, t0 = Counter(), Counter(), Counter(), Counter(), 0, None
    try:
        for t, data, orig in records(a.file):
            t0 = t if t0 is None else t0
            t -= t0
            p = decode(data, orig)
            if isinstance(p, str):
                bad[p] += 1
                if not a.summary:
                    print(f"{t:>12} malformed: {p}")
                continue
            ops[p["op"]] += 1
            payload[p["op"]] += p["plen"]
            if p["op"] == "NACK":
                nacks[status(p["status"])] += 1
            if p["crc"] == "BAD":
                bad["bad checksum"] += 1
            if a.summary or (a.op and p["op"] not in a.op):
                continue
            if a.limit and shown >= a.limit:
                continue
            shown += 1
            print(line(t, p))
    except BrokenPipeError:
        return
    if a.summary:
        for op in OPS.values():
            if ops[op]:
                print(f"{op:<9} {ops[op]:>8} packets {payload[op]:>12} payload bytes")
        for st, n in sorted(nacks.items()):
            print(f"NACK {st}: {n}")
        for why, n in sorted(bad.items()):
            print(f"malformed or damaged: {why}: {n}")


if __name__ == "__main__":
    main()
