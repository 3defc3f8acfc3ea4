"""Self-tests of scripts/exanest-pcap.py: the CRC32C and the header decoding."""
import importlib.util
import os
import struct
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("pcap", os.path.join(TOP, "scripts", "exanest-pcap.py"))
pcap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pcap)


def packet(op=1, payload=b"x" * 100, status=0, offset=4096):
    h = pcap.HDR.pack(0xEDA0, pcap.VERSION, op, 0, 1, 3, 9, 1, status, 0x1234, 0x7000, 8192, offset,
                      len(payload), 0, 0)
    crc = pcap.crc32c(h[:60] + b"\0\0\0\0" + payload)
    return h[:60] + struct.pack("<I", crc) + payload


class Pcap(unittest.TestCase):
    def test_crc32c_check_value(self):
        # The CRC-32C catalogue's check value (as packet.rs's host test).
        self.assertEqual(0xE3069283, pcap.crc32c(b"123456789"))

    def test_decode(self):
        p = pcap.decode(packet(), 164)
        self.assertEqual(("WRITE", 0, 1, 3, 4096, 100, "ok"),
                         (p["op"], p["src"], p["dst"], p["ep"], p["offset"], p["plen"], p["crc"]))
        bad = bytearray(packet())
        bad[100] ^= 1
        self.assertEqual("BAD", pcap.decode(bytes(bad), 164)["crc"])
        self.assertEqual("cut", pcap.decode(packet()[:128], 164)["crc"])
        self.assertIn("payload_len", pcap.decode(packet(), 200))
        self.assertIn("short", pcap.decode(b"\xa0\xed", 2))
        self.assertEqual("-ENOKEY", pcap.status(pcap.decode(packet(5, b"", -126), 64)["status"]))
        self.assertEqual("AHEAD", pcap.status(pcap.decode(packet(5, b"", 5), 64)["status"]))

    def test_records(self):
        with tempfile.NamedTemporaryFile(suffix=".pcap", delete=False) as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65536, 1))
            for t, p in ((5, packet()), (7, packet(6, b""))):
                f.write(struct.pack("<IIII", 0, t, len(p), len(p)) + p)
        try:
            got = [(t, pcap.decode(d, n)["op"]) for t, d, n in pcap.records(f.name)]
        finally:
            os.unlink(f.name)
        self.assertEqual([(5, "WRITE"), (7, "RESUME")], got)


if __name__ == "__main__":
    unittest.main()
