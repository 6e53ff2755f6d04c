//! The hasher of the engine's tables (primitive: depends on no other module).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hash rustc uses for its own tables: the keys here are small
/// (ints, interned ids, tokens) and nobody chooses them to collide.
#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Fx {
    #[inline]
    pub(crate) fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            self.add(tail_word(rest));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The 1 to 7 bytes of `rest` as the word they start, zero bytes after them (the same
/// word a zeroed buffer with them copied in reads): two overlapping reads, the same bytes
/// where they overlap, with no call. The copy into a buffer was a call of libc's memcpy
/// for each text hashed (a host, a client, a command: more than one a DOME line, issue 30).
#[inline(always)]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    let at = |i: usize, k: usize| rest[i..i + k].iter().rev().fold(0u64, |w, &b| w << 8 | u64::from(b));
    match n {
        4.. => at(0, 4) | at(n - 4, 4) << (8 * (n - 4)),
        2.. => at(0, 2) | at(n - 2, 2) << (8 * (n - 2)),
        _ => u64::from(rest[0]),
    }
}

/// The hash of a text's bytes, for a place that keeps it beside the text, made once.
pub(crate) fn of_text(text: &str) -> u64 {
    let mut h = Fx::default();
    h.write(text.as_bytes());
    h.finish()
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;
pub type FxSet<K> = HashSet<K, BuildHasherDefault<Fx>>;

#[cfg(test)]
mod tests {
    use super::tail_word;

    #[test]
    fn a_tail_is_the_word_its_bytes_start_with_zeros_after() {
        let bytes: Vec<u8> = (1..=7u8).map(|b| b.wrapping_mul(0x9d)).collect();
        for n in 1..=7 {
            let mut buf = [0u8; 8];
            buf[..n].copy_from_slice(&bytes[..n]);
            assert_eq!(tail_word(&bytes[..n]), u64::from_le_bytes(buf), "{n} bytes");
        }
    }
}
