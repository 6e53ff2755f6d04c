//! The lines a compiled feed takes (`feed_lines`): a block over the read buffers, or a
//! list of bytes or str, read line by line without copying.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::block::LineBlock;

/// The lines feed_lines takes: a block over the read buffers (replay's plain files), or a
/// list of bytes or str (everything else).
pub(crate) enum Chunk<'a, 'py> {
    Block(&'a LineBlock),
    List(&'a Bound<'py, PyList>),
}

impl<'py> Chunk<'_, 'py> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Chunk::Block(b) => b.len(),
            Chunk::List(l) => l.len(),
        }
    }

    /// Line i's bytes, and the list item that holds them (None in a block, whose buffer
    /// outlives the call): the caller keeps it while it uses the bytes, since records it
    /// emits meanwhile run Python. None for a line neither bytes nor UTF-8 text (Python's).
    pub(crate) fn line(&self, i: usize) -> PyResult<Option<(&'static [u8], Option<Bound<'py, PyAny>>)>> {
        let (ptr, len, item) = match self {
            Chunk::Block(b) => {
                let raw = b.line(i);
                (raw.as_ptr(), raw.len(), None)
            }
            Chunk::List(l) => {
                let item = l.get_item(i)?;
                let raw = if let Ok(b) = item.downcast::<PyBytes>() {
                    b.as_bytes()
                } else if let Ok(Ok(t)) = item.downcast::<PyString>().map(|s| s.to_str()) {
                    t.as_bytes()
                } else {
                    return Ok(None);
                };
                (raw.as_ptr(), raw.len(), Some(item))
            }
        };
        // SAFETY: the bytes live as long as what holds them: the block (for the call) or
        // the item returned beside them, which the caller keeps while it uses them.
        Ok(Some((unsafe { std::slice::from_raw_parts(ptr, len) }, item)))
    }
}

/// `bytes` as UTF-8 text (None: not UTF-8); ASCII, the common case, without decoding.
pub(crate) fn utf8(bytes: &[u8]) -> Option<&str> {
    if ascii(bytes) {
        // SAFETY: ASCII is UTF-8
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// Whether `bytes` are all ASCII: each 16 bytes OR-ed into one 16-byte lane (one vector OR
/// a chunk), the last 16 read again for the rest, the lanes folded once at the end, where
/// str::from_utf8 steps a word at a time: ~183 instructions a DOME line in the compiled
/// feed (issue 30).
fn ascii(bytes: &[u8]) -> bool {
    let Some(tail) = bytes.len().checked_sub(16) else {
        return bytes.iter().fold(0u8, |any, &c| any | c) < 0x80;
    };
    let mut lanes: [u8; 16] = bytes[tail..].try_into().expect("the last 16");
    for chunk in bytes.chunks_exact(16) {
        for (lane, &c) in lanes.iter_mut().zip(chunk) {
            *lane |= c;
        }
    }
    lanes.iter().fold(0u8, |any, &c| any | c) < 0x80
}

#[cfg(test)]
mod tests {
    use super::utf8;

    #[test]
    fn text_is_what_std_reads_whatever_the_length_and_wherever_a_byte_past_ascii_stands() {
        for len in 0..70 {
            let line: Vec<u8> = (0..len).map(|i| b' ' + (i % 95) as u8).collect();
            assert_eq!(utf8(&line), Some(std::str::from_utf8(&line).unwrap()));
            for at in 0..len {
                for (bytes, valid) in [(&[0x80u8][..], false), (&[0xff][..], false), (&[0xc3, 0xa9][..], true)] {
                    let mut other = line.clone();
                    other.splice(at..at + 1, bytes.iter().copied());
                    assert_eq!(utf8(&other), std::str::from_utf8(&other).ok(), "{len} {at}");
                    assert_eq!(utf8(&other).is_some(), valid);
                }
            }
        }
    }
}
