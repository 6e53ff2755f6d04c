//! The lines a compiled feed takes (`feed_lines`): a block over one read buffer, or a
//! list of bytes or str, read line by line without copying.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::block::LineBlock;

/// The lines feed_lines takes: a block over one read buffer (replay's plain files), or a
/// list of bytes or str (everything else).
pub(crate) enum Chunk<'a, 'py> {
    Block(&'a LineBlock, &'a [u8]),
    List(&'a Bound<'py, PyList>),
}

impl<'py> Chunk<'_, 'py> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Chunk::Block(b, _) => b.len(),
            Chunk::List(l) => l.len(),
        }
    }

    /// Line i's bytes, and the list item that holds them (None in a block, whose buffer
    /// outlives the call): the caller keeps it while it uses the bytes, since records it
    /// emits meanwhile run Python. None for a line neither bytes nor UTF-8 text (Python's).
    pub(crate) fn line(&self, i: usize) -> PyResult<Option<(&'static [u8], Option<Bound<'py, PyAny>>)>> {
        let (ptr, len, item) = match self {
            Chunk::Block(b, data) => {
                let raw = b.line(data, i);
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
