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
//! Op ids count per peer, from a random first id at the sender's power-up (as InfiniBand's
//! random start PSN): the ops one source sends to this node are consecutive, so one whose id is
//! more than [`REACH`] ids from the highest this node saw of it is of no sequence it knows
//! ([`History::admit`]). From a source that was quiet for [`QUIET_NS`] with no op live here,
//! that is the source restarted, with a new first id: what was known of it goes, and its new
//! ops are new (a reused key, address and length no longer match a finished op's record:
//! Transport v2's defect 2). Otherwise it is dropped, and not learned from: one forged request
//! far ahead can no longer push the floor past every honest op (defect 3).
//!
//! [`Header::span`]: crate::packet::Header::span

/// Op ids whose end a [`History`] records above its floor.
pub const WINDOW: u32 = 4096;
/// How far from the highest op id seen of a source (either way) one of its requests may be.
pub const REACH: u32 = 1 << 20;
/// How long a source must have sent nothing before a request of no sequence this node knows
/// is taken as the source restarted.
pub const QUIET_NS: u64 = 1_000_000_000;
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

/// What [`History::admit`] makes of a request's op id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Of the source's sequence (or the first one seen of it).
    Known,
    /// Of no sequence known, after the source was quiet: it restarted. What was known of it is
    /// gone; the caller ends what it holds of the source's old ops.
    Restarted,
    /// Of no sequence known, while the source is active: drop it.
    Stray,
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
    /// The highest op id seen in a request, and when the last request came.
    high: Option<(u32, u64)>,
}

impl Default for History {
    fn default() -> Self {
        History {
            floor: None,
            base: None,
            done: [0; WORDS],
            failed: [0; WORDS],
            high: None,
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

    /// A request of op `op_id` came at `now`: of the source's sequence, or the source restarted
    /// (after [`QUIET_NS`] with nothing sent, and `live()` false: no op of it live here, asked
    /// only then), or a stray. Known and restarted requests count as the source's latest.
    pub fn admit(&mut self, op_id: u32, now: u64, live: impl FnOnce() -> bool) -> Admit {
        let verdict = match self.high {
            None => Admit::Known,
            Some((high, _)) if op_id.wrapping_sub(high).wrapping_add(REACH) <= 2 * REACH => {
                Admit::Known
            }
            Some((_, last)) if now.saturating_sub(last) >= QUIET_NS && !live() => {
                *self = History::default();
                Admit::Restarted
            }
            Some(_) => return Admit::Stray,
        };
        let high = match self.high {
            Some((h, _)) if before(op_id, h) => h,
            _ => op_id,
        };
        self.high = Some((high, now));
        verdict
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

    /// A source's requests within [`REACH`] of the highest id seen are its sequence; one far
    /// from it is a stray while the source is active (and teaches nothing: the floor stays),
    /// and the source restarted once it was quiet with no op live.
    #[test]
    fn a_far_id_is_a_stray_or_a_restart() {
        let mut h = History::default();
        assert_eq!(
            h.admit(1000, 0, || false),
            Admit::Known,
            "the first one seen"
        );
        h.learn(1000, 1);
        h.forget(999 + 50, true);
        assert_eq!(h.admit(1000 + REACH, 10, || false), Admit::Known);
        assert_eq!(
            h.admit(1000, 20, || false),
            Admit::Known,
            "behind the highest, within reach"
        );
        // Defect 3: a forged request 2^31 - 1 ahead used to push the floor past every op.
        let far = 1000u32.wrapping_add(i32::MAX as u32);
        assert_eq!(h.admit(far, 30, || false), Admit::Stray);
        assert_eq!(h.past(1049), Past::Done);
        assert_eq!(
            h.admit(far, 30 + QUIET_NS, || true),
            Admit::Stray,
            "an op is live here"
        );
        // Quiet for a second, nothing live: the source restarted from a new first id.
        assert_eq!(h.admit(far, 30 + QUIET_NS, || false), Admit::Restarted);
        assert_eq!(h.past(1049), Past::New, "the old records are gone");
        assert_eq!(
            h.admit(far.wrapping_add(1), 31 + QUIET_NS, || false),
            Admit::Known
        );
        assert_eq!(
            h.admit(1000, 40 + QUIET_NS, || false),
            Admit::Stray,
            "the old sequence"
        );
        // Ids wrap within reach.
        let mut w = History::default();
        w.admit(u32::MAX - 2, 0, || false);
        assert_eq!(w.admit(5, 1, || false), Admit::Known);
        assert_eq!(w.admit(u32::MAX - 10, 2, || false), Admit::Known);
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
