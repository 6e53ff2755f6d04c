//! The duplicate memory: the latest `cap` distinct line digests, the oldest forgotten
//! first, as `parsers/reassembly.py` keeps them (a set and its insertion order).
//!
//! Every line asks it once and, when new, adds itself and pushes the oldest out. A digest
//! is of the whole line, its stream (host, daemon) and stamp included, and a stream's
//! lines come nearly always in stamp order; so each stream keeps its digests in the order
//! they came, with their stamps (`Stream::log`), and every remembered line is written and
//! forgotten at the ends of queues, in sequence, never at a random place in a table of
//! `cap` entries. A line stamped after every line its stream gave is new without a look;
//! one at that latest stamp is looked for among the stream's digests of that stamp (a few
//! warm entries, `at_latest`); only a line stamped before it (a file read twice, a clock
//! stepped back) is looked for in the log, by a search on its stamp from the end, and among the
//! digests that came out of their stream's order (`side`, a hash set, where such a line
//! goes when new). Answers are exact: a match is of the whole digest.
//!
//! Before (issue 30), the digests were in cache-line buckets chosen by the digest, a random
//! line of ~0.8 MiB read and written each line and another to forget the oldest: the
//! largest single stall of every legacy shape, and a memory of 1,024 lines instead of
//! 131,072 replayed the threads shape ~11% faster (prefetching the buckets moved the stall
//! elsewhere: what it cost was the cache the buckets took from the other tables).
//!
//! Memory follows the lines seen, as Python's set does (a large `cap` costs nothing
//! upfront): 12 bytes a line remembered (its digest, and its stamp as an offset from its
//! stream's base: `Logged`), 8 more for each run of one stream's lines in `order`, and ~17
//! more each for those out of order. It was 20 bytes a line (the stamp whole, an `order`
//! entry a line): in a Kafka worker, a memory for each partition, ~10 MiB of its peak RSS
//! on bench_worker's 465,512 lines (issue 30).

use std::collections::VecDeque;

use crate::hashing::{FxMap, FxSet};
use crate::names::Sym;

/// The largest duplicate memory (lines): a remembered line's place in `order` holds its
/// stream's index in 31 bits.
pub const MAX_DUPLICATE_MEMORY: usize = 1 << 31;
/// `order`'s bit for a line remembered in `side` (else in its stream's log).
const SIDE: u32 = 1 << 31;

/// A remembered line of a stream's log, in 12 bytes: its digest, and its stamp less the
/// stream's `base`, 0 for a stamp at or before the base (`Stream::at`). A line is looked
/// for by its stamp only to find it fast: the digest alone says whether it is remembered
/// (a digest is of the line's stamp too), so lines whose stamps share an offset (0) are
/// told apart exactly.
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
struct Logged {
    at: u32,
    digest: u64,
}

/// One stream's remembered lines that came in stamp order.
#[derive(Default)]
struct Stream {
    /// Oldest first: stamps (so offsets) never decrease along it.
    log: VecDeque<Logged>,
    /// The stamp the log's offsets count from: its first line's, moved on (`rebase`) when
    /// a stamp would be more than u32::MAX past it (~49.7 days of milliseconds).
    base: i64,
    /// The latest stamp of a line of this stream remembered (None: none yet).
    latest: Option<i64>,
    /// The digests of `log` stamped `latest`.
    at_latest: FxSet<u64>,
}

impl Stream {
    /// The offset of stamp `ts` (the latest's or before it): 0 at or before the base.
    #[inline]
    fn at(&self, ts: i64) -> u32 {
        (ts - self.base).clamp(0, u32::MAX as i64) as u32
    }

    /// Appends a line stamped `ts`, the stream's latest (so at or after the base, unless
    /// it is the stream's first: the base of a new stream is 0).
    #[inline]
    fn push(&mut self, ts: i64, digest: u64) {
        let mut at = ts.wrapping_sub(self.base) as u64;
        if at > u32::MAX as u64 {
            at = self.rebase(ts) as u64;
        }
        self.log.push_back(Logged { at: at as u32, digest });
    }

    /// A base half the offsets' range behind `ts`: the log's offsets less the shift, those
    /// it would take below 0 at 0 (their lines stamped at or before the new base). Once in
    /// ~24.8 days of a stream's stamps at most (and at its first line). Returns ts's offset.
    #[cold]
    #[inline(never)]
    fn rebase(&mut self, ts: i64) -> u32 {
        let base = ts.saturating_sub(1i64 << 31);
        // Never below the old base while the log holds lines: they are stamped at or before
        // `ts`, the latest, and the base at or before them.
        let shift = (base - self.base).clamp(0, u32::MAX as i64) as u32;
        for e in self.log.iter_mut() {
            e.at = e.at.saturating_sub(shift);
        }
        self.base = base;
        self.at(ts)
    }
}

pub struct DigestWindow {
    cap: usize,
    /// Lines remembered (at most `cap`).
    held: usize,
    /// The remembered lines, oldest first, in runs: (its stream's index, with SIDE where
    /// it is in `side` rather than its stream's log; how many lines in a row). Lines come
    /// in runs of one stream (a fetched batch's file, a side-by-side lane's turn), so a run
    /// of 8 bytes stands for tens to thousands of lines: an entry a line (4 bytes) was a
    /// fifth of the memory of a Kafka worker's partition (issue 30).
    order: VecDeque<(u32, u32)>,
    streams: Vec<Stream>,
    stream_index: FxMap<(Sym, Sym), u32>,
    /// The stream asked last, and its index (lines come in runs of one stream).
    last_stream: Option<((Sym, Sym), u32)>,
    /// The digests remembered that came stamped before their stream's latest, and their
    /// order, oldest first.
    side: FxSet<u64>,
    side_order: VecDeque<u64>,
}

impl DigestWindow {
    /// A memory of `cap` digests (1 to u32::MAX - 1).
    pub fn new(cap: usize) -> Self {
        assert!(cap >= 1 && cap < u32::MAX as usize, "duplicate memory out of range: {cap}");
        DigestWindow {
            cap,
            held: 0,
            order: VecDeque::new(),
            streams: Vec::new(),
            stream_index: FxMap::default(),
            last_stream: None,
            side: FxSet::default(),
            side_order: VecDeque::new(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.held
    }

    /// The index of `stream` (a new one made with nothing remembered).
    #[inline]
    fn stream(&mut self, stream: (Sym, Sym)) -> usize {
        if let Some((key, s)) = self.last_stream {
            if key == stream {
                return s as usize;
            }
        }
        let streams = &mut self.streams;
        let s = *self.stream_index.entry(stream).or_insert_with(|| {
            streams.push(Stream::default());
            (streams.len() - 1) as u32
        });
        assert!(s < SIDE, "more streams than the duplicate memory can tell apart");
        self.last_stream = Some((stream, s));
        s as usize
    }

    /// Whether the digest of a line of stream `s` stamped `ts` before its stream's latest
    /// is remembered: in the log among those of its stamp, or in `side`.
    fn behind(&self, s: usize, digest: u64, ts: i64) -> bool {
        let st = &self.streams[s];
        let at = st.at(ts);
        let from = first_at_or_after(&st.log, at);
        st.log.range(from..).take_while(|e| e.at == at).any(|e| e.digest == digest)
            || self.side.contains(&digest)
    }

    /// Whether `digest`, of a line of `stream` stamped `ts`, is remembered.
    #[cfg(test)]
    fn contains(&self, digest: u64, stream: (Sym, Sym), ts: i64) -> bool {
        let Some(&s) = self.stream_index.get(&stream) else { return false };
        let st = &self.streams[s as usize];
        match st.latest {
            Some(latest) if ts == latest => st.at_latest.contains(&digest),
            Some(latest) if ts < latest => self.behind(s as usize, digest, ts),
            _ => false,
        }
    }

    /// Remembers `digest`, the digest of a line of `stream` stamped `ts` (a digest is
    /// always of the same stream and stamp): false if it was already remembered (nothing
    /// changes), true if new (the oldest is forgotten when the memory is full).
    pub fn insert(&mut self, digest: u64, stream: (Sym, Sym), ts: i64) -> bool {
        let s = self.stream(stream);
        // Every digest remembered of this stream is stamped at or before `latest`, those
        // stamped `latest` are in at_latest, and those before it in the log or in side.
        let in_log = match self.streams[s].latest {
            Some(latest) if ts < latest => {
                if self.behind(s, digest, ts) {
                    return false;
                }
                false
            }
            Some(latest) if ts == latest => {
                if self.streams[s].at_latest.contains(&digest) {
                    return false;
                }
                true
            }
            _ => true,
        };
        if self.held == self.cap {
            self.forget_oldest();
        }
        self.held += 1;
        if in_log {
            let st = &mut self.streams[s];
            if st.latest != Some(ts) {
                st.latest = Some(ts);
                st.at_latest.clear();
            }
            st.at_latest.insert(digest);
            st.push(ts, digest);
            self.push_order(s as u32);
        } else {
            self.side.insert(digest);
            self.side_order.push_back(digest);
            self.push_order(s as u32 | SIDE);
        }
        true
    }

    /// A line of `tag` (stream index and SIDE) remembered last: its run lengthened, or a
    /// run begun.
    #[inline]
    fn push_order(&mut self, tag: u32) {
        if let Some((last, n)) = self.order.back_mut() {
            if *last == tag && *n < u32::MAX {
                *n += 1;
                return;
            }
        }
        self.order.push_back((tag, 1));
    }

    fn forget_oldest(&mut self) {
        let Some((oldest, n)) = self.order.front_mut() else { return };
        let oldest = *oldest;
        if *n > 1 {
            *n -= 1;
        } else {
            self.order.pop_front();
        }
        self.held -= 1;
        if oldest & SIDE != 0 {
            let digest = self.side_order.pop_front().expect("a side line in order is in side_order");
            self.side.remove(&digest);
        } else {
            let st = &mut self.streams[oldest as usize];
            let Logged { at, digest } = st.log.pop_front().expect("a logged line in order is in its stream's log");
            if let Some(ahead) = st.log.get(LOG_AHEAD) {
                prefetch(ahead);
            }
            // Stamped the latest: an offset of 0 is the latest's only while the latest is
            // the base, when no line is stamped before the base.
            if st.latest.map(|latest| st.at(latest)) == Some(at) {
                st.at_latest.remove(&digest);
            }
        }
    }
}

/// How far ahead of a stream log's front its lines are asked for, in entries (192 bytes):
/// the front was written `cap` lines ago, and its line came from memory on demand (1.5% of
/// the threads shape's samples in forget_oldest).
const LOG_AHEAD: usize = 16;

/// Asks the memory system for the line holding `at` ahead of its use.
#[inline]
fn prefetch<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints; the pointer is to a live value.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((at as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// The index of the first entry of `log` (stamps never decreasing along it) stamped at or
/// after `ts`. A line behind its stream's latest stamp is nearly always just behind it
/// (threads stamping out of turn): the search gallops back from the end, over the log's
/// warm tail, before it halves; a binary search from the middle read ~17 cold entries of a
/// 2 MiB log (4% of State::process's samples on the threads shape, perf).
fn first_at_or_after(log: &VecDeque<Logged>, ts: u32) -> usize {
    let n = log.len();
    // The answer lies in lo..=hi: entries from hi on are at or after ts, those before lo before it.
    let (mut lo, mut hi) = (0, n);
    let mut back = 1;
    while back <= n {
        if log[n - back].at < ts {
            lo = n - back + 1;
            break;
        }
        hi = n - back;
        back *= 2;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if log[mid].at < ts {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::{first_at_or_after, DigestWindow, Logged};
    use std::collections::{HashSet, VecDeque};

    /// The reference: the set and order of parsers/reassembly.py.
    struct Model {
        cap: usize,
        set: HashSet<u64>,
        order: VecDeque<u64>,
    }

    impl Model {
        fn insert(&mut self, d: u64) -> bool {
            if !self.set.insert(d) {
                return false;
            }
            self.order.push_back(d);
            if self.order.len() > self.cap {
                let old = self.order.pop_front().unwrap();
                self.set.remove(&old);
            }
            true
        }
    }

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The window against the model on `lines` draws of `distinct` lines, line k of stream
    /// k % `streams` stamped k / per_stamp, or, with `shuffled`, at a stamp of its own
    /// drawn at random: half the draws near a cursor that moves through the lines (at and
    /// after their stream's latest stamp, and repeats of those), half any line (earlier
    /// stamps: repeats inside and outside the window, and new lines out of order).
    fn agree(cap: usize, distinct: u64, lines: usize, streams: u64, per_stamp: u64, shuffled: bool) {
        let mut w = DigestWindow::new(cap);
        let mut m = Model { cap, set: HashSet::new(), order: VecDeque::new() };
        let mut rng = 7u64;
        // Distinct digests: a digest is of one line, so of one stream and stamp.
        let mut values: Vec<(u64, (u32, u32), i64)> = Vec::new();
        let mut taken = HashSet::new();
        while (values.len() as u64) < distinct {
            let d = splitmix(&mut rng);
            let k = values.len() as u64;
            let ts = if shuffled { (splitmix(&mut rng) % (distinct / per_stamp + 1)) as i64 } else { (k / per_stamp) as i64 };
            if taken.insert(d) {
                values.push((d, ((k % streams) as u32, 7), ts));
            }
        }
        for i in 0..lines {
            let r = splitmix(&mut rng);
            let k = if r % 2 == 0 {
                ((i as u64 * distinct / lines as u64) + (r >> 8) % 4).min(distinct - 1)
            } else {
                (r >> 8) % distinct
            };
            let (d, stream, ts) = values[k as usize];
            assert_eq!(w.insert(d, stream, ts), m.insert(d), "cap {cap}, line {i}, digest {d:#x}");
            assert_eq!(w.len(), m.order.len());
        }
        for &(d, stream, ts) in &values {
            assert_eq!(w.contains(d, stream, ts), m.set.contains(&d), "cap {cap}, digest {d:#x} at the end");
        }
        // Nothing forgotten is held: the side set and each stream's latest digests are of
        // remembered lines only.
        assert_eq!(w.side.len(), w.side_order.len());
        assert_eq!(w.side.len() + w.streams.iter().map(|s| s.log.len()).sum::<usize>(), w.len());
        for st in &w.streams {
            assert!(st.at_latest.iter().all(|d| m.set.contains(d)));
        }
    }

    #[test]
    fn it_remembers_exactly_the_latest_distinct_digests_whatever_the_size() {
        for cap in [1, 2, 3, 7, 15, 16, 31, 100, 1000, 5000] {
            for distinct in [2, cap as u64, cap as u64 * 2 + 1, 5000] {
                agree(cap, distinct.max(1), 20_000, 3, 4, false);
            }
        }
    }

    #[test]
    fn lines_of_one_stamp_and_of_many_streams_are_told_apart() {
        // Every line at one stamp (a log stamped coarsely), and a stream for each line.
        for cap in [10, 1000, 5000] {
            agree(cap, 3000, 20_000, 1, u64::MAX, false);
            agree(cap, 3000, 20_000, 3000, 4, false);
        }
    }

    #[test]
    fn lines_out_of_their_streams_order_are_remembered_aside_and_forgotten_in_turn() {
        // Stamps at random: most new lines come behind their stream's latest stamp.
        for cap in [1, 5, 100, 1000, 5000] {
            agree(cap, 3000, 20_000, 3, 4, true);
            agree(cap, 3000, 20_000, 2, 100, true);
        }
    }

    #[test]
    fn its_queues_grow_with_the_lines_it_holds_not_with_its_size() {
        let mut w = DigestWindow::new(1 << 31);
        let mut rng = 11u64;
        for ts in 0..5000 {
            w.insert(splitmix(&mut rng), (0, 0), ts / 3);
        }
        assert_eq!(w.len(), 5000);
        assert!(w.order.capacity() < 10_000 && w.streams[0].log.capacity() < 10_000);
    }

    #[test]
    fn the_search_from_the_end_finds_a_stamps_first_entry_as_a_binary_search_does() {
        let mut rng = 5u64;
        for n in 0..70 {
            let mut log = VecDeque::new();
            let mut ts = 1;
            for _ in 0..n {
                ts += (splitmix(&mut rng) % 3) as u32; // runs of one stamp, and gaps
                log.push_back(Logged { at: ts, digest: 0 });
            }
            for want in 0..=ts + 1 {
                assert_eq!(first_at_or_after(&log, want), log.partition_point(|e| e.at < want), "{n} entries, stamp {want}");
            }
        }
    }

    /// Lines drawn for the tests below, each (digest, stream, stamp): one draw in `again` an
    /// earlier line read again (at or behind its stream's latest stamp), else a new line of
    /// stream `s` stamped `step(a draw)` after the stream's latest.
    struct Draws {
        rng: u64,
        lines: Vec<(u64, (u32, u32), i64)>,
        stamp: Vec<i64>,
    }

    impl Draws {
        fn new(seed: u64, streams: usize) -> Self {
            Draws { rng: seed, lines: Vec::new(), stamp: vec![0; streams] }
        }

        fn next(&mut self, s: usize, again: u64, step: impl Fn(u64) -> i64) -> (u64, (u32, u32), i64) {
            let r = splitmix(&mut self.rng);
            if r % again == 0 && !self.lines.is_empty() {
                return self.lines[(r >> 8) as usize % self.lines.len()];
            }
            self.stamp[s] += step(r >> 8);
            let line = (splitmix(&mut self.rng), (s as u32, 1), self.stamp[s]);
            self.lines.push(line);
            line
        }
    }

    #[test]
    fn runs_of_one_streams_lines_are_held_as_one_entry_and_forgotten_line_by_line() {
        // Three streams taking turns in runs of 1 to 40 lines, stamps ascending in each,
        // some lines read twice and some behind their stream's latest: the memory agrees
        // with the model at every line, whichever run its oldest line is in, and holds one
        // `order` entry per run (a stream's lines and its lines aside are runs apart).
        for cap in [1, 2, 7, 100, 1000] {
            let mut w = DigestWindow::new(cap);
            let mut m = Model { cap, set: HashSet::new(), order: VecDeque::new() };
            let mut draws = Draws::new(3, 3);
            for run in 0..300 {
                for _ in 0..1 + splitmix(&mut draws.rng) % 40 {
                    let line = draws.next(run % 3, 10, |x| (x % 3) as i64);
                    assert_eq!(w.insert(line.0, line.1, line.2), m.insert(line.0), "cap {cap}, run {run}");
                    assert_eq!(w.len(), m.order.len());
                }
            }
            let stream_of: std::collections::HashMap<u64, (u32, u32)> = draws.lines.iter().map(|l| (l.0, l.1)).collect();
            let mut runs = 0;
            let mut last = None;
            for d in &m.order {
                let tag = Some((stream_of[d], w.side.contains(d)));
                runs += (tag != last) as usize;
                last = tag;
            }
            assert_eq!(w.order.len(), runs, "cap {cap}");
            assert_eq!(w.order.iter().map(|&(_, n)| n as usize).sum::<usize>(), w.len());
        }
    }

    #[test]
    fn stamps_weeks_apart_move_the_base_and_lines_before_it_are_still_told_apart() {
        // Two streams whose stamps leap by up to ~100 days of milliseconds now and then
        // (offsets from the base would pass u32::MAX), lines read again behind the latest,
        // some from before the base: the memory agrees with the model at every line.
        for cap in [1, 7, 100, 1000] {
            let mut w = DigestWindow::new(cap);
            let mut m = Model { cap, set: HashSet::new(), order: VecDeque::new() };
            let mut draws = Draws::new(17, 2);
            for i in 0..6000 {
                let line = draws.next((i / 7) % 2, 5, |x| if x % 11 == 1 { (x % (1 << 33)) as i64 } else { (x % 3) as i64 });
                assert_eq!(w.insert(line.0, line.1, line.2), m.insert(line.0), "cap {cap}, line {i}");
            }
            if cap == 1000 {
                // It was put to the test: a log holding lines from before its base.
                assert!(w.streams.iter().any(|st| st.log.iter().filter(|e| e.at == 0).count() > 1));
            }
        }
    }

    #[test]
    fn a_remembered_line_takes_12_bytes_of_its_streams_log() {
        assert_eq!(std::mem::size_of::<Logged>(), 12);
    }

    #[test]
    fn a_memory_of_one_line_forgets_at_each_new_line() {
        let mut w = DigestWindow::new(1);
        assert!(w.insert(5, (0, 0), 1));
        assert!(!w.insert(5, (0, 0), 1));
        assert!(w.insert(6, (0, 0), 1));
        assert!(w.insert(5, (0, 0), 1));
        assert_eq!(w.len(), 1);
    }
}
