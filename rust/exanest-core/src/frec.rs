// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The fault record ring of a context (register map 2.11), as the driver reads it: the engine
//! writes a record of every fault to memory before it raises the channel's interrupt, so the
//! driver learns a fault's channel, address, direction, cause and origin without reading the
//! channel's registers (six to nine MMIO reads per fault, each 55-200 ns of the fault's path
//! under -icount and about a microsecond over PCIe). The ring and its registers are the
//! driver's; this is the bookkeeping, tested on the host.
//!
//! A record is a snapshot: the fault it describes may have been answered already, through the
//! channel's registers (a scan, or a fault whose record found no room). Each channel numbers
//! its faults (its fault number, modulo 256), which the record and `CH_STATUS` both carry: the
//! reader remembers, per channel, the number of the fault it last took by either way, and
//! drops a record of that fault. An answer names the fault too (`ctrl::SEQ_CHECK`), so an
//! answer to a fault that ended cannot end the channel's next one.

use super::regs::{frec, MAX_CHANNELS};

/// One record of the ring: [`frec::SIZE`] bytes, little-endian.
pub type RecordBytes = [u8; frec::SIZE];
/// 64-bit words of a record.
pub const WORDS: usize = frec::SIZE / 8;
/// One record as the driver reads it from memory: its little-endian 64-bit words.
pub type RecordWords = [u64; WORDS];

/// A decoded fault record: what the channel's fault registers said when it entered fault-wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultRecord {
    /// The channel.
    pub channel: u8,
    /// The channel's fault number for this fault (`CH_STATUS.FAULT_SEQ`).
    pub seq: u8,
    /// The faulting IOVA (`FAULT_LO`/`_HI`).
    pub addr: u64,
    /// `FAULT_INFO`.
    pub info: u32,
    /// `ORIGIN`.
    pub origin: u32,
    /// `WRID_LO`/`_HI`.
    pub wr_id: u64,
    /// The end of the faulting transfer's bytes in the faulting direction (2.10).
    pub end: u64,
    /// `CH_NET_SRC`: a receiver fault's sending node.
    pub net_src: u32,
    /// `CH_NET_OPID`.
    pub net_opid: u32,
    /// `DONE_BYTES`.
    pub done: u32,
}

fn put(b: &mut RecordBytes, off: usize, n: usize, v: u64) {
    for (i, x) in b[off..off + n].iter_mut().enumerate() {
        *x = (v >> (8 * i)) as u8;
    }
}

/// The field of `n` bytes at `off` of a record's words (no field straddles two words).
const fn word_field(w: &RecordWords, off: usize, n: usize) -> u64 {
    let v = w[off / 8] >> ((off % 8) * 8);
    if n >= 8 {
        v
    } else {
        v & ((1u64 << (8 * n)) - 1)
    }
}

impl FaultRecord {
    /// Decode a record from its words, as read from memory (its stamp aside): a few shifts,
    /// on the fault's path.
    pub const fn decode_words(w: &RecordWords) -> Self {
        let chan = word_field(w, frec::CHAN_OFF, 4);
        FaultRecord {
            channel: chan as u8,
            seq: (chan >> 8) as u8,
            addr: word_field(w, frec::ADDR_OFF, 8),
            info: word_field(w, frec::INFO_OFF, 4) as u32,
            origin: word_field(w, frec::ORIGIN_OFF, 4) as u32,
            wr_id: word_field(w, frec::WRID_OFF, 8),
            end: word_field(w, frec::END_OFF, 8),
            net_src: word_field(w, frec::NET_SRC_OFF, 4) as u32,
            net_opid: word_field(w, frec::NET_OPID_OFF, 4) as u32,
            done: word_field(w, frec::DONE_OFF, 4) as u32,
        }
    }

    /// The stamp of a record's words.
    pub const fn stamp_of_words(w: &RecordWords) -> u32 {
        word_field(w, frec::STAMP_OFF, 4) as u32
    }

    /// The stamp in a record's last word, which the reader reads first (the engine writes
    /// it last).
    pub const fn stamp_of_last_word(last: u64) -> u32 {
        let mut w = [0u64; WORDS];
        w[WORDS - 1] = last;
        Self::stamp_of_words(&w)
    }

    /// The bytes the engine writes for this record at free-running index `index`.
    pub fn encode(&self, index: u32) -> RecordBytes {
        let mut b = [0; frec::SIZE];
        let chan = u64::from(self.channel) | u64::from(self.seq) << 8;
        put(&mut b, frec::CHAN_OFF, 4, chan);
        put(&mut b, frec::ADDR_OFF, 8, self.addr);
        put(&mut b, frec::INFO_OFF, 4, self.info.into());
        put(&mut b, frec::ORIGIN_OFF, 4, self.origin.into());
        put(&mut b, frec::WRID_OFF, 8, self.wr_id);
        put(&mut b, frec::END_OFF, 8, self.end);
        put(&mut b, frec::NET_SRC_OFF, 4, self.net_src.into());
        put(&mut b, frec::NET_OPID_OFF, 4, self.net_opid.into());
        put(&mut b, frec::DONE_OFF, 4, self.done.into());
        put(&mut b, frec::STAMP_OFF, 4, index.wrapping_add(1).into());
        b
    }
}

/// The stamp a complete record at free-running index `index` carries.
pub const fn stamp_for(index: u32) -> u32 {
    index.wrapping_add(1)
}

/// Log2 of the records of the driver's ring: one 4 KiB page. A context has at most
/// [`MAX_CHANNELS`] faults outstanding, and the reader frees records every half ring.
pub const LOG2: u32 = 6;
/// Records of the driver's ring.
pub const RECORDS: u32 = 1 << LOG2;

/// The reader's side of one context's fault record ring.
#[derive(Debug)]
pub struct RingReader {
    /// Whether the engine writes records (enabled, and not stopped by QUIESCE or RESET since).
    enabled: bool,
    /// The next record to read (free-running).
    head: u32,
    /// The `FREC_HEAD` last written.
    freed: u32,
    /// Per channel: its newest record not taken yet.
    latest: [Option<FaultRecord>; MAX_CHANNELS],
    /// Per channel: the number of the fault last taken, by record or by registers.
    taken: [Option<u8>; MAX_CHANNELS],
    /// Records dropped as stale (their fault was taken through the registers first).
    pub stale: u64,
}

impl Default for RingReader {
    fn default() -> Self {
        Self::new()
    }
}

impl RingReader {
    /// A ring not enabled yet.
    pub const fn new() -> Self {
        RingReader {
            enabled: false,
            head: 0,
            freed: 0,
            latest: [None; MAX_CHANNELS],
            taken: [None; MAX_CHANNELS],
            stale: 0,
        }
    }

    /// The engine enabled the ring: both indices are 0, no record is held. What was taken
    /// is kept: a channel's fault numbers run on across a QUIESCE.
    pub fn set_enabled(&mut self) {
        self.enabled = true;
        self.head = 0;
        self.freed = 0;
        self.latest = [None; MAX_CHANNELS];
    }

    /// The engine stopped the ring (QUIESCE, RESET): nothing is read from it until it is
    /// enabled again, and no fault is held (the context's channels were stopped).
    pub fn stopped(&mut self) {
        self.enabled = false;
        self.latest = [None; MAX_CHANNELS];
    }

    /// Whether the ring is enabled.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The ring index of the next record to read and the stamp that says it is complete,
    /// while the ring is enabled.
    pub fn next(&self) -> Option<(usize, u32)> {
        self.enabled
            .then_some(((self.head & (RECORDS - 1)) as usize, stamp_for(self.head)))
    }

    /// The record at [`RingReader::next`] read `stamp` and `rec`: taken in if it is complete
    /// (its stamp says so), held as its channel's newest fault unless that fault was taken
    /// already. Returns whether it was complete (the caller reads the next one then).
    pub fn offer(&mut self, stamp: u32, rec: &FaultRecord) -> bool {
        if !self.enabled || stamp != stamp_for(self.head) {
            return false;
        }
        self.head = self.head.wrapping_add(1);
        let c = usize::from(rec.channel);
        if c >= MAX_CHANNELS {
            return true;
        }
        if self.taken[c] == Some(rec.seq) {
            self.stale += 1;
        } else {
            self.latest[c] = Some(*rec);
        }
        true
    }

    /// The `FREC_HEAD` to write now, if any: every half ring read, so that the engine always
    /// finds room without a register write per fault.
    pub fn due_head(&mut self) -> Option<u32> {
        if self.head.wrapping_sub(self.freed) < RECORDS / 2 {
            return None;
        }
        self.freed = self.head;
        Some(self.head)
    }

    /// Whether channel `c` has a record of a fault not taken yet.
    pub fn has(&self, c: u32) -> bool {
        self.latest.get(c as usize).is_some_and(|r| r.is_some())
    }

    /// Take channel `c`'s newest record: its fault is taken.
    pub fn take(&mut self, c: u32) -> Option<FaultRecord> {
        let i = c as usize;
        let r = self.latest.get_mut(i)?.take()?;
        self.taken[i] = Some(r.seq);
        Some(r)
    }

    /// Channel `c`'s fault numbered `seq` was taken through its registers: a record of it,
    /// held or read later, is stale.
    pub fn taken_by_registers(&mut self, c: u32, seq: u8) {
        let i = c as usize;
        let Some(t) = self.taken.get_mut(i) else {
            return;
        };
        *t = Some(seq);
        if self.latest[i].is_some_and(|r| r.seq == seq) {
            self.latest[i] = None;
            self.stale += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(channel: u8, seq: u8, addr: u64) -> FaultRecord {
        FaultRecord {
            channel,
            seq,
            addr,
            info: 1 | 1 << 8,
            origin: 0xc000_0003,
            wr_id: 0x1122_3344_5566_7788,
            end: addr + 0x1000,
            net_src: 7,
            net_opid: 0xdead_beef,
            done: 4096,
        }
    }

    /// No field straddles two words (the driver decodes words); words and bytes decode alike.
    #[test]
    fn fields_fit_their_words() {
        for (off, n) in [
            (frec::ADDR_OFF, 8),
            (frec::INFO_OFF, 4),
            (frec::ORIGIN_OFF, 4),
            (frec::WRID_OFF, 8),
            (frec::END_OFF, 8),
            (frec::NET_SRC_OFF, 4),
            (frec::NET_OPID_OFF, 4),
            (frec::CHAN_OFF, 4),
            (frec::DONE_OFF, 4),
            (frec::STAMP_OFF, 4),
        ] {
            assert!(off % 8 + n <= 8, "field at {off}");
        }
        let r = rec(7, 3, 0x1234_5678_9abc);
        let w = words(&r.encode(9));
        assert_eq!(FaultRecord::decode_words(&w), r);
        assert_eq!(FaultRecord::stamp_of_words(&w), 10);
        assert_eq!(FaultRecord::stamp_of_last_word(w[WORDS - 1]), 10);
    }

    /// A record's bytes as the reader reads them: little-endian words.
    fn words(b: &RecordBytes) -> RecordWords {
        let mut w = [0u64; WORDS];
        for (i, x) in w.iter_mut().enumerate() {
            *x = u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        }
        w
    }

    /// The bytes are the header's layout; decoding gives back what was encoded.
    #[test]
    fn encode_decode_roundtrip() {
        let r = rec(5, 200, 0xffff_8000_1000);
        let b = r.encode(41);
        assert_eq!(FaultRecord::stamp_of_words(&words(&b)), 42);
        assert_eq!(b[frec::CHAN_OFF..frec::CHAN_OFF + 2], [5, 200]);
        assert_eq!(
            b[frec::ADDR_OFF..frec::ADDR_OFF + 8],
            0xffff_8000_1000u64.to_le_bytes()
        );
        assert_eq!(b[frec::DONE_OFF..frec::DONE_OFF + 4], 4096u32.to_le_bytes());
        assert_eq!(FaultRecord::decode_words(&words(&b)), r);
        assert_eq!(
            FaultRecord::stamp_of_words(&words(&rec(0, 0, 0).encode(u32::MAX))),
            0,
            "stamps wrap"
        );
    }

    /// Records are taken in order while complete; each channel holds its newest; a taken
    /// record is gone.
    #[test]
    fn complete_records_are_taken_in_order() {
        let mut r = RingReader::new();
        assert_eq!(r.next(), None);
        assert!(!r.offer(1, &rec(0, 1, 0x1000)), "not enabled");
        r.set_enabled();
        assert_eq!(r.next(), Some((0, 1)));
        assert!(!r.offer(0, &rec(0, 1, 0x1000)), "not written yet");
        assert!(r.offer(1, &rec(0, 1, 0x1000)));
        assert!(r.offer(2, &rec(3, 9, 0x5000)));
        assert!(!r.offer(2, &rec(3, 9, 0x5000)), "index 2 wants stamp 3");
        assert_eq!(r.next(), Some((2, 3)));
        assert!(r.has(0) && r.has(3) && !r.has(1));
        assert_eq!(r.take(3).map(|f| f.addr), Some(0x5000));
        assert!(!r.has(3));
        assert_eq!(r.take(3), None);
        assert_eq!(r.take(40), None);
        // A newer fault of channel 0 replaces the older record.
        assert!(r.offer(3, &rec(0, 2, 0x2000)));
        assert_eq!(r.take(0).map(|f| (f.seq, f.addr)), Some((2, 0x2000)));
    }

    /// A fault taken through the registers first makes its record stale, held or read later;
    /// the channel's next fault is taken from its record.
    #[test]
    fn records_of_faults_taken_by_registers_are_stale() {
        let mut r = RingReader::new();
        r.set_enabled();
        assert!(r.offer(1, &rec(2, 7, 0x1000)));
        r.taken_by_registers(2, 7);
        assert!(!r.has(2));
        r.taken_by_registers(2, 8);
        assert!(r.offer(2, &rec(2, 8, 0x2000)), "read, and dropped");
        assert!(!r.has(2));
        assert!(r.offer(3, &rec(2, 9, 0x3000)));
        assert_eq!(r.take(2).map(|f| f.seq), Some(9));
        assert_eq!(r.stale, 2);
        r.taken_by_registers(99, 0);
    }

    /// HEAD is written every half ring read; enabling again starts from 0, and a stopped ring
    /// holds nothing and reads nothing.
    #[test]
    fn frees_every_half_ring_and_restarts_at_enable() {
        let mut r = RingReader::new();
        r.set_enabled();
        let mut writes = 0;
        for i in 0..RECORDS * 2 {
            assert_eq!(r.next(), Some(((i % RECORDS) as usize, i + 1)));
            assert!(r.offer(stamp_for(i), &rec((i % 8) as u8, i as u8, 0)));
            if let Some(h) = r.due_head() {
                writes += 1;
                assert_eq!(h, i + 1);
            }
        }
        assert_eq!(writes, 4);
        r.stopped();
        assert!(!r.has(1) && r.next().is_none());
        assert!(!r.offer(stamp_for(RECORDS * 2), &rec(1, 1, 0)));
        r.set_enabled();
        assert_eq!(r.next(), Some((0, 1)));
        assert!(r.offer(1, &rec(1, 1, 0)));
        assert_eq!(r.due_head(), None);
    }

    /// Indices wrap past 2^32 like the engine's.
    #[test]
    fn indices_wrap() {
        let mut r = RingReader::new();
        r.set_enabled();
        r.head = u32::MAX;
        r.freed = u32::MAX - RECORDS / 2 + 1;
        assert!(r.offer(0, &rec(1, 1, 0)));
        assert_eq!(r.due_head(), Some(0));
        assert_eq!(r.next(), Some((0, 1)));
    }
}
