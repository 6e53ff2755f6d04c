//! The duplicate memory: the latest `cap` distinct line digests, the oldest forgotten
//! first, as `parsers/reassembly.py` keeps them (a set and its insertion order).
//!
//! Every line asks it once and, when new, adds itself and pushes the oldest out: two
//! random probes a line into a structure of `cap` entries, which is what this layout
//! makes cheap. A digest lives in `ring` (insertion order, read and written in sequence)
//! and a 32-bit entry points at it from a cache-line bucket: its ring position and as
//! many bits of the digest as fit, so a probe reads one 64-byte line, and the ring only
//! to confirm a match. 131072 lines take 1.8 MB (a std HashSet and VecDeque took 3.4),
//! and a line touches about two cold cache lines instead of four.
//!
//! A digest's home bucket takes it while it has room; past that it goes to a second
//! bucket (and the home bucket counts it), and where both are full to a small stash, so
//! no entry is ever lost. Answers are exact: a match is checked on the whole digest.
//!
//! Memory follows the lines seen, as Python's set does: the buckets start small and are
//! doubled, and refilled from the ring, as it fills (a large `cap` costs nothing upfront).

use crate::hashing::FxMap;

/// The largest duplicate memory (lines): the window's entries hold a ring position in 32 bits.
pub const MAX_DUPLICATE_MEMORY: usize = 1 << 31;
const SLOTS: usize = 15; // entries per bucket; the 16th word counts those sent elsewhere
const META: usize = 15;
/// Entries per bucket on average (of SLOTS): room to spare, so few go elsewhere.
const LOAD: usize = 10;
/// Buckets before the first doubling.
const FIRST_BUCKETS: usize = 64;

#[repr(C, align(64))]
#[derive(Clone, Copy, Default)]
struct Bucket([u32; 16]);

pub struct DigestWindow {
    cap: usize,
    ring: Vec<u64>,
    next: usize, // ring position of the next digest (that of the oldest when full)
    buckets: Vec<Bucket>,
    pos_bits: u32,
    stash: FxMap<u64, usize>,
}

impl DigestWindow {
    /// A memory of `cap` digests (1 to u32::MAX - 1).
    pub fn new(cap: usize) -> Self {
        assert!(cap >= 1 && cap < u32::MAX as usize, "duplicate memory out of range: {cap}");
        let pos_bits = usize::BITS - cap.leading_zeros(); // holds 1..=cap
        DigestWindow {
            cap,
            ring: Vec::new(),
            next: 0,
            buckets: vec![Bucket::default(); cap.div_ceil(LOAD).min(FIRST_BUCKETS)],
            pos_bits,
            stash: FxMap::default(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.ring.len()
    }

    fn home(&self, digest: u64) -> (usize, usize) {
        let n = self.buckets.len() as u64;
        let first = ((digest & 0xffff_ffff) * n >> 32) as usize;
        let mut second = ((digest >> 32) * n >> 32) as usize;
        if second == first {
            second = (first + 1) % self.buckets.len();
        }
        (first, second)
    }

    /// The entry's bits that hold the digest's top bits (none when the position takes all 32).
    fn tag_mask(&self) -> u32 {
        if self.pos_bits >= 32 {
            0
        } else {
            u32::MAX << self.pos_bits
        }
    }

    /// Low bits of the digest, which choose neither bucket (those read the top bits of
    /// each word), moved up above the position.
    fn tag(&self, digest: u64) -> u32 {
        (digest as u32).checked_shl(self.pos_bits).unwrap_or(0)
    }

    fn entry(&self, digest: u64, pos: usize) -> u32 {
        self.tag(digest) | (pos as u32 + 1)
    }

    fn pos_of(&self, entry: u32) -> usize {
        (entry & !self.tag_mask()) as usize - 1
    }

    /// The slots of bucket `b` whose entry `e` has `e & and == want`, and those empty, as
    /// bits (the count word left out).
    #[inline]
    fn slots(&self, b: usize, and: u32, want: u32) -> (u32, u32) {
        let (hits, empty) = bucket_bits(&self.buckets[b], and, want);
        (hits & ((1 << SLOTS) - 1), empty & ((1 << SLOTS) - 1))
    }

    fn in_bucket(&self, b: usize, digest: u64) -> bool {
        let (tag, mask) = (self.tag(digest), self.tag_mask());
        let (hits, empty) = self.slots(b, mask, tag);
        let mut hits = hits & !empty;
        while hits != 0 {
            let e = self.buckets[b].0[hits.trailing_zeros() as usize];
            if self.ring[self.pos_of(e)] == digest {
                return true;
            }
            hits &= hits - 1;
        }
        false
    }

    /// Asks the memory system for bucket `b` ahead of its use. The memory is larger than
    /// L2: its two random reads a line (the new digest's bucket, the oldest digest's
    /// bucket to forget it) were half of State::process's time (perf annotate).
    #[inline]
    fn prefetch_bucket(&self, b: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            if let Some(bucket) = self.buckets.get(b) {
                // SAFETY: a prefetch only hints; the pointer is to a live bucket.
                unsafe { _mm_prefetch::<_MM_HINT_T0>((bucket as *const Bucket).cast::<i8>()) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = b;
    }

    pub fn contains(&self, digest: u64) -> bool {
        let (first, second) = self.home(digest);
        if self.in_bucket(first, digest) {
            return true;
        }
        if self.buckets[first].0[META] == 0 {
            return false;
        }
        self.in_bucket(second, digest) || self.stash.contains_key(&digest)
    }

    /// Remembers `digest`: false if it was already remembered (nothing changes), true if
    /// new (the oldest is forgotten when the memory is full).
    pub fn insert(&mut self, digest: u64) -> bool {
        if self.contains(digest) {
            return false;
        }
        let pos = self.next;
        self.next = if pos + 1 == self.cap { 0 } else { pos + 1 };
        if self.ring.len() == self.cap {
            self.forget(pos);
            self.ring[pos] = digest;
        } else {
            self.ring.push(digest);
            if self.ring.len() > self.buckets.len() * LOAD {
                self.grow(); // places every digest of the ring, this one too
                return true;
            }
        }
        self.place(digest, pos);
        if self.ring.len() == self.cap {
            // The next insert forgets the digest at `next` first: fetch its bucket now,
            // a line ahead, instead of waiting for it then.
            self.prefetch_bucket(self.home(self.ring[self.next]).0);
        }
        true
    }

    fn place(&mut self, digest: u64, pos: usize) {
        let entry = self.entry(digest, pos);
        let (first, second) = self.home(digest);
        if self.put(first, entry) {
            return;
        }
        self.buckets[first].0[META] += 1;
        if !self.put(second, entry) {
            self.stash.insert(digest, pos);
        }
    }

    /// Twice the buckets (at most what `cap` needs), refilled from the ring: it is not full
    /// yet, so its positions are those of its digests, oldest first.
    fn grow(&mut self) {
        let buckets = (self.buckets.len() * 2).min(self.cap.div_ceil(LOAD));
        self.buckets = vec![Bucket::default(); buckets];
        self.stash.clear();
        for pos in 0..self.ring.len() {
            self.place(self.ring[pos], pos);
        }
    }

    fn put(&mut self, b: usize, entry: u32) -> bool {
        let free = self.slots(b, 0, 0).1;
        if free == 0 {
            return false;
        }
        self.buckets[b].0[free.trailing_zeros() as usize] = entry;
        true
    }

    fn take(&mut self, b: usize, pos: usize) -> bool {
        let (want, mask) = (pos as u32 + 1, !self.tag_mask());
        let at = self.slots(b, mask, want).0; // want > 0: no empty slot passes
        if at == 0 {
            return false;
        }
        self.buckets[b].0[at.trailing_zeros() as usize] = 0;
        true
    }

    /// Drops the digest at ring position `pos` from the buckets (the ring slot is reused).
    fn forget(&mut self, pos: usize) {
        let digest = self.ring[pos];
        let (first, second) = self.home(digest);
        if self.take(first, pos) {
            return;
        }
        self.buckets[first].0[META] -= 1;
        if !self.take(second, pos) {
            self.stash.remove(&digest);
        }
    }
}

/// Each word `w` of a bucket with `w & and == want` (bit i for word i), and each zero.
/// SSE2 (every x86-64 has it): four compares of four words, the lanes packed to bytes and
/// their top bits read at once, about half the instructions of the compiler's own
/// vectorising of the loop (`bucket_bits_by_word`, which other machines run), and this is
/// done two or three times for every line read.
#[cfg(target_arch = "x86_64")]
#[inline]
fn bucket_bits(bucket: &Bucket, and: u32, want: u32) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86-64; a Bucket is 64 bytes aligned to 64, read as four
    // aligned 16-byte vectors.
    unsafe {
        let p = bucket.0.as_ptr().cast::<__m128i>();
        let (a, w, z) = (_mm_set1_epi32(and as i32), _mm_set1_epi32(want as i32), _mm_setzero_si128());
        let v = [_mm_load_si128(p), _mm_load_si128(p.add(1)), _mm_load_si128(p.add(2)), _mm_load_si128(p.add(3))];
        let hit = v.map(|x| _mm_cmpeq_epi32(_mm_and_si128(x, a), w));
        let zero = v.map(|x| _mm_cmpeq_epi32(x, z));
        // Each lane is 0 or -1: packing with signed saturation keeps it so.
        let bits = |m: [__m128i; 4]| {
            let (lo, hi) = (_mm_packs_epi32(m[0], m[1]), _mm_packs_epi32(m[2], m[3]));
            _mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32
        };
        (bits(hit), bits(zero))
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn bucket_bits(bucket: &Bucket, and: u32, want: u32) -> (u32, u32) {
    bucket_bits_by_word(bucket, and, want)
}

/// bucket_bits, word by word: the reference the SSE2 form is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn bucket_bits_by_word(bucket: &Bucket, and: u32, want: u32) -> (u32, u32) {
    let (mut hits, mut empty) = (0u32, 0u32);
    for (i, &w) in bucket.0.iter().enumerate() {
        hits |= u32::from(w & and == want) << i;
        empty |= u32::from(w == 0) << i;
    }
    (hits, empty)
}

#[cfg(test)]
mod tests {
    use super::{bucket_bits, bucket_bits_by_word, Bucket, DigestWindow, META, SLOTS};
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

    fn agree(cap: usize, distinct: u64, lines: usize, squeeze: u64) {
        let mut w = DigestWindow::new(cap);
        let mut m = Model { cap, set: HashSet::new(), order: VecDeque::new() };
        let mut rng = 7u64;
        // Digests drawn from `distinct` values: repeats inside and outside the window.
        let values: Vec<u64> = (0..distinct).map(|_| splitmix(&mut rng) & squeeze).collect();
        for i in 0..lines {
            let d = values[(splitmix(&mut rng) % distinct) as usize];
            assert_eq!(w.insert(d), m.insert(d), "cap {cap}, line {i}, digest {d:#x}");
            assert_eq!(w.len(), m.order.len());
        }
        for &d in &values {
            assert_eq!(w.contains(d), m.set.contains(&d), "cap {cap}, digest {d:#x} at the end");
        }
        // Each bucket counts exactly its digests kept elsewhere (else lookups go on
        // to the second bucket for nothing, or stop before it).
        let mut away = vec![0u32; w.buckets.len()];
        for (pos, &d) in w.ring.iter().enumerate() {
            let (first, _) = w.home(d);
            if !w.buckets[first].0[..SLOTS].iter().any(|&e| e != 0 && w.pos_of(e) == pos) {
                away[first] += 1;
            }
        }
        let counted: Vec<u32> = w.buckets.iter().map(|b| b.0[META]).collect();
        assert_eq!(counted, away, "cap {cap}: digests away from their home bucket");
    }

    #[test]
    fn a_buckets_slots_are_found_alike_by_vector_and_by_word() {
        let mut rng = 11u64;
        for round in 0..20_000 {
            let mut b = Bucket::default();
            for w in b.0.iter_mut() {
                let r = splitmix(&mut rng);
                // Zeros, repeats of a few values and any word, so every test meets each.
                *w = match r % 4 {
                    0 => 0,
                    1 => (r >> 8) as u32 & 0x7,
                    _ => (r >> 16) as u32,
                };
            }
            let r = splitmix(&mut rng);
            let and = if round % 3 == 0 { u32::MAX } else { (r >> 32) as u32 };
            let want = match round % 4 {
                0 => 0,
                1 => b.0[(r % 16) as usize] & and,
                _ => (r as u32 & 0x7) & and,
            };
            assert_eq!(bucket_bits(&b, and, want), bucket_bits_by_word(&b, and, want), "{:?} and {and:#x} want {want:#x}", b.0);
        }
    }

    #[test]
    fn it_remembers_exactly_the_latest_distinct_digests_whatever_the_size() {
        for cap in [1, 2, 3, 7, 15, 16, 31, 100, 1000, 5000] {
            for distinct in [2, cap as u64, cap as u64 * 2 + 1, 5000] {
                agree(cap, distinct.max(1), 20_000, u64::MAX);
            }
        }
    }

    #[test]
    fn full_buckets_send_digests_to_their_second_bucket_and_the_stash_without_loss() {
        // Both words small: every digest has home bucket 0 and second bucket 1, so the
        // two overflow at once and the rest waits in the stash.
        for cap in [40, 200] {
            agree(cap, 1000, 20_000, 0x000f_ffff_000f_ffff);
        }
    }

    #[test]
    fn digests_that_share_their_tag_are_told_apart_by_the_ring() {
        // The low 22 bits of the low word (the tag, for 1000 lines) are zero: every
        // entry carries one tag.
        agree(1000, 3000, 50_000, 0xffff_ffff_ffc0_0000);
    }

    #[test]
    fn its_buckets_grow_with_the_lines_it_holds_not_with_its_size() {
        let mut w = DigestWindow::new(1 << 31);
        assert!(w.buckets.len() <= 64);
        let mut rng = 11u64;
        for _ in 0..5000 {
            w.insert(splitmix(&mut rng));
        }
        assert_eq!(w.len(), 5000);
        assert!(w.buckets.len() * 10 >= 5000 && w.buckets.len() <= 1024, "{} buckets", w.buckets.len());
        // and the full memory of the default size stops at what it needs
        let mut w = DigestWindow::new(131_072);
        for _ in 0..300_000 {
            w.insert(splitmix(&mut rng));
        }
        assert_eq!(w.buckets.len(), 131_072usize.div_ceil(10));
    }

    #[test]
    fn a_memory_of_one_line_forgets_at_each_new_line() {
        let mut w = DigestWindow::new(1);
        assert!(w.insert(5));
        assert!(!w.insert(5));
        assert!(w.insert(6));
        assert!(w.insert(5));
        assert_eq!(w.len(), 1);
    }
}
