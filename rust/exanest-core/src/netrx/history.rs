// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! What a receiving node knows of one source node's past ops (Transport v2): which ones the
//! source is done with, and how each finished op that the receive table forgot ended.
//!
//! Op ids count up at their sender, one engine-wide sequence, but its ops run side by side on
//! many channels: a later op can finish, and be forgotten here, before an earlier one's first
//! packet arrives (its source page was faulting at the sender; it waited for a slot). So a
//! forgotten op says nothing about the ops before it. What does is the sender's own word: a
//! request's [`Header::span`] says that every op of the sender before
//! `op_id - (span - 1)` is finished there ([`History::learn`]), so that a packet of one is a
//! stray copy that the link delivered late, never of use. Above that floor, the table records
//! each finished op it forgets ([`History::forget`]), done or failed, in a window of
//! [`WINDOW`] ids: a copy of a forgotten op that finished is ACKed again (its sender's last
//! ACK may have been lost: InfiniBand's C9-105 re-acknowledges a duplicate request so), and
//! one that failed is refused ESTALE, while an op never seen is new, however late. Only when
//! ops finish and are forgotten more than [`WINDOW`] ids past the floor does the window move
//! up without it, and an op below is then too old to tell ([`Past::TooOld`]).
//!
//! [`Header::span`]: crate::packet::Header::span

/// Op ids whose end a [`History`] records above its floor.
pub const WINDOW: u32 = 4096;
const WORDS: usize = WINDOW as usize / 64;

/// What a packet's op is to a [`History`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Past {
    /// Its sender is done with it: a stray copy.
    Finished,
    /// Below the window of records, above the floor: it may have finished here.
    TooOld,
    /// It finished here, all of it placed, and was forgotten.
    Done,
    /// It ended here with an error, and was forgotten.
    Failed,
    /// Never seen (or not forgotten: the table may hold it).
    New,
}

/// Whether op id `a` comes before `b` (ids wrap: within 2^31 of each other).
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// One source's past ops, as a receiver knows them.
#[derive(Clone, Debug)]
pub struct History {
    /// Every op before it is finished at its sender (its word, the highest it gave).
    floor: Option<u32>,
    /// The first id of the window of records; `None` until an op is forgotten.
    base: Option<u32>,
    /// Bit `id % WINDOW`: op `id` (in the window) finished placed, and was forgotten.
    done: [u64; WORDS],
    /// Bit `id % WINDOW`: op `id` (in the window) failed, and was forgotten.
    failed: [u64; WORDS],
}

impl Default for History {
    fn default() -> Self {
        History {
            floor: None,
            base: None,
            done: [0; WORDS],
            failed: [0; WORDS],
        }
    }
}

impl History {
    fn bit(id: u32) -> (usize, u64) {
        let i = id % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn clear(&mut self, id: u32) {
        let (w, b) = Self::bit(id);
        self.done[w] &= !b;
        self.failed[w] &= !b;
    }

    /// Move the window's first id up to `to`: the records of the ids it leaves go.
    fn slide(&mut self, to: u32) {
        let Some(base) = self.base else {
            return;
        };
        if !before(base, to) {
            return;
        }
        let n = to.wrapping_sub(base);
        if n >= WINDOW {
            self.done = [0; WORDS];
            self.failed = [0; WORDS];
        } else {
            for k in 0..n {
                self.clear(base.wrapping_add(k));
            }
        }
        self.base = Some(to);
    }

    /// A request of op `op_id` said `span` ([`crate::packet::Header::span`]; 0 says nothing).
    pub fn learn(&mut self, op_id: u32, span: u16) {
        if span == 0 {
            return;
        }
        let floor = op_id.wrapping_sub(u32::from(span) - 1);
        if self.floor.is_some_and(|f| !before(f, floor)) {
            return;
        }
        self.floor = Some(floor);
        self.slide(floor);
    }

    /// The table forgot op `op_id`, which ended `ok` (all of it placed) or not.
    pub fn forget(&mut self, op_id: u32, ok: bool) {
        if self.floor.is_some_and(|f| before(op_id, f)) {
            return;
        }
        let base = *self
            .base
            .get_or_insert(self.floor.unwrap_or(op_id.wrapping_sub(WINDOW - 1)));
        if before(op_id, base) {
            return; // already too old to tell
        }
        if op_id.wrapping_sub(base) >= WINDOW {
            self.slide(op_id.wrapping_sub(WINDOW - 1));
        }
        let (w, b) = Self::bit(op_id);
        if ok {
            self.done[w] |= b;
            self.failed[w] &= !b;
        } else {
            self.failed[w] |= b;
            self.done[w] &= !b;
        }
    }

    /// What op `op_id`, which the table does not hold, is.
    pub fn past(&self, op_id: u32) -> Past {
        if self.floor.is_some_and(|f| before(op_id, f)) {
            return Past::Finished;
        }
        let Some(base) = self.base else {
            return Past::New;
        };
        if before(op_id, base) {
            return Past::TooOld;
        }
        if op_id.wrapping_sub(base) >= WINDOW {
            return Past::New;
        }
        let (w, b) = Self::bit(op_id);
        if self.done[w] & b != 0 {
            Past::Done
        } else if self.failed[w] & b != 0 {
            Past::Failed
        } else {
            Past::New
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_op_is_new_whatever_finished_after_it() {
        let mut h = History::default();
        h.learn(10, 1); // op 10 is the sender's oldest unfinished
        for id in 11..11 + WINDOW - 1 {
            h.forget(id, true);
        }
        assert_eq!(h.past(10), Past::New);
        assert_eq!(h.past(9), Past::Finished);
        assert_eq!(h.past(11), Past::Done);
        assert_eq!(h.past(11 + WINDOW), Past::New);
    }

    #[test]
    fn forgotten_ops_say_how_they_ended() {
        let mut h = History::default();
        h.forget(10_000, true);
        // Without the sender's word, the first record puts the window's top at it.
        assert_eq!(h.past(10_000 - WINDOW), Past::TooOld);
        assert_eq!(h.past(10_000 - WINDOW + 1), Past::New);
        h.forget(10_001, false);
        assert_eq!(h.past(10_000), Past::Done);
        assert_eq!(h.past(10_001), Past::Failed);
        assert_eq!(h.past(10_002), Past::New);
        assert_eq!(h.past(10_000 - WINDOW + 1), Past::TooOld);
    }

    #[test]
    fn the_sender_s_word_moves_the_floor_up_only() {
        let mut h = History::default();
        h.forget(5, true);
        h.learn(20, 3); // ops before 18 are finished at the sender
        assert_eq!(h.past(17), Past::Finished);
        assert_eq!(h.past(5), Past::Finished);
        assert_eq!(h.past(18), Past::New);
        h.learn(19, 5); // an older word, late: ops before 15
        assert_eq!(h.past(17), Past::Finished);
        h.learn(30, 0); // says nothing
        assert_eq!(h.past(18), Past::New);
        // Records above the floor stay as it moves, those below go.
        h.forget(40, true);
        h.learn(41, 2);
        assert_eq!(h.past(40), Past::Done);
        h.learn(50, 1);
        assert_eq!(h.past(40), Past::Finished);
    }

    #[test]
    fn past_the_window_the_oldest_become_too_old() {
        let mut h = History::default();
        h.learn(1000, 1);
        h.forget(1001, false);
        h.forget(1000 + WINDOW + 10, true); // the window moves up to keep it
        assert_eq!(h.past(1000 + WINDOW + 10), Past::Done);
        assert_eq!(h.past(1000), Past::TooOld);
        assert_eq!(h.past(1001), Past::TooOld);
        assert_eq!(h.past(1011), Past::New);
        // A record reused by the window is not an old op's.
        assert_eq!(h.past(1001 + WINDOW), Past::New);
    }

    #[test]
    fn ids_wrap() {
        let mut h = History::default();
        h.learn(3, 10); // the oldest unfinished is u32::MAX - 5
        assert_eq!(h.past(u32::MAX - 6), Past::Finished);
        assert_eq!(h.past(u32::MAX - 5), Past::New);
        h.forget(u32::MAX, true);
        h.forget(1, false);
        assert_eq!(h.past(u32::MAX), Past::Done);
        assert_eq!(h.past(1), Past::Failed);
        assert_eq!(h.past(0), Past::New);
    }
}
