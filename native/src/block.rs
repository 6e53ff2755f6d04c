//! Lines split in the extension: replay reads an archive a megabyte at a time, cut by
//! streams/linecut's rule (so no line here is longer than about a read), and hands
//! the engine blocks of lines over that buffer (streams/inputs.iter_chunks), not lists of
//! bytes objects, one allocated and freed per line. A block is a read-only sequence of
//! bytes lines (len, index, slice, iteration, equality with a list of bytes), so the
//! Python code that takes lines one at a time (the slow path, the Python engine) takes it
//! as it takes a list.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PySlice};

#[pyclass(module = "dpmstream.parsers._native", sequence, frozen)]
pub struct LineBlock {
    buf: Py<PyBytes>,
    /// Line i is buf[bounds[i]..bounds[i + 1]], its newline included.
    bounds: Vec<usize>,
}

extern "C" {
    // The C library's, vectorised for the machine it runs on (a word-at-a-time loop here
    // took twice the instructions a line).
    fn memchr(s: *const std::ffi::c_void, c: std::ffi::c_int, n: usize) -> *mut std::ffi::c_void;
}

/// The first b'\n' in `s`.
fn find_newline(s: &[u8]) -> Option<usize> {
    // SAFETY: memchr reads at most s.len() bytes from s's start and returns a pointer
    // into them or null.
    let p = unsafe { memchr(s.as_ptr().cast(), i32::from(b'\n'), s.len()) };
    if p.is_null() {
        None
    } else {
        Some(p as usize - s.as_ptr() as usize)
    }
}

impl LineBlock {
    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Line i (no bounds check beyond the slice's) of the buffer's bytes `data`.
    pub fn line<'a>(&self, data: &'a [u8], i: usize) -> &'a [u8] {
        &data[self.bounds[i]..self.bounds[i + 1]]
    }

    pub fn data<'py>(&self, py: Python<'py>) -> &[u8] {
        // SAFETY: the block holds `buf` (immutable bytes) for as long as it lives, and
        // callers use the slice while they hold the block.
        let b = self.buf.bind(py).as_bytes();
        unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) }
    }

    /// The block of `bounds` (from 0) over the texts from `from` to `to` (part, offset):
    /// the part itself when it is bytes and holds the block, else a copy of the span.
    fn over(parts: &[Bound<'_, PyAny>], texts: &[&[u8]], from: (usize, usize), to: (usize, usize), mut bounds: Vec<usize>) -> PyResult<LineBlock> {
        if from.0 == to.0 {
            if let Ok(bytes) = parts[from.0].downcast::<PyBytes>() {
                bounds.iter_mut().for_each(|b| *b += from.1);
                return Ok(LineBlock { buf: bytes.clone().unbind(), bounds });
            }
        }
        let len = *bounds.last().unwrap_or(&0);
        let py = parts[0].py();
        // Bytes left uninitialised and filled here: PyBytes::new_with zeroes them first, a
        // second pass over every byte copied.
        // SAFETY: a new bytes object of `len` bytes, owned here, written whole below before
        // any Python code sees it.
        let buf = unsafe {
            Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as isize))?
                .downcast_into_unchecked::<PyBytes>()
        };
        let out = unsafe { std::slice::from_raw_parts_mut(pyo3::ffi::PyBytes_AsString(buf.as_ptr()).cast::<u8>(), len) };
        let mut filled = 0;
        for (j, text) in texts.iter().enumerate().take(to.0 + 1).skip(from.0) {
            let lo = if j == from.0 { from.1 } else { 0 };
            let hi = if j == to.0 { to.1 } else { text.len() };
            out[filled..filled + hi - lo].copy_from_slice(&text[lo..hi]);
            filled += hi - lo;
        }
        Ok(LineBlock { buf: buf.unbind(), bounds })
    }

    fn to_list<'py>(&self, py: Python<'py>, from: usize, to: usize) -> PyResult<Bound<'py, PyList>> {
        let data = self.data(py);
        PyList::new(py, (from..to).map(|i| PyBytes::new(py, self.line(data, i))))
    }
}

#[pymethods]
impl LineBlock {
    /// `data`'s whole lines in blocks of `size`, and the offset of what is left: fewer
    /// than `size` lines, or an unfinished one. With `last` (the input ended), what is
    /// left is a block too (its final line may lack a newline) and the offset is len(data).
    #[staticmethod]
    fn split(data: Bound<'_, PyBytes>, size: usize, last: bool) -> PyResult<(Vec<LineBlock>, usize)> {
        let len = data.as_bytes().len();
        let (blocks, _, at) = Self::split_parts(vec![data.into_any()], size, last)?;
        Ok((blocks, if last { len } else { at }))
    }

    /// split() of the text the buffers `parts` make in turn (bytes or memoryviews of
    /// them), without joining them first: a block within one bytes part holds that part,
    /// one that spans parts is copied once into bytes of its own (a join of what a read
    /// carried with the next read copied the carried lines again at every read). What is
    /// left starts at (part index, offset in it); with `last` it is (len(parts), 0).
    #[staticmethod]
    fn split_parts(parts: Vec<Bound<'_, PyAny>>, size: usize, last: bool) -> PyResult<(Vec<LineBlock>, usize, usize)> {
        let size = size.max(1);
        let views = parts.iter().map(PyBuffer::<u8>::get).collect::<PyResult<Vec<_>>>()?;
        let mut texts: Vec<&[u8]> = Vec::with_capacity(views.len());
        for view in &views {
            if !view.is_c_contiguous() {
                return Err(PyValueError::new_err("a part is not a contiguous buffer"));
            }
            // SAFETY: the buffer is held (views) while the slice is used, and read only.
            texts.push(unsafe { std::slice::from_raw_parts(view.buf_ptr() as *const u8, view.len_bytes()) });
        }
        let mut blocks = Vec::new();
        let total: usize = texts.iter().map(|t| t.len()).sum();
        let room = size.min(total) + 1;
        // The block being filled starts at texts[first.0][first.1..]; `base` is the block
        // offset of the current text's byte 0 (negative when the block starts inside it).
        let mut first = (0usize, 0usize);
        let mut bounds = Vec::with_capacity(room);
        bounds.push(0usize);
        let mut base = 0isize;
        for (j, text) in texts.iter().enumerate() {
            let mut at = if j == first.0 { first.1 } else { 0 };
            while let Some(p) = find_newline(&text[at..]) {
                at += p + 1;
                bounds.push((base + at as isize) as usize);
                if bounds.len() > size {
                    let mut next = Vec::with_capacity(room);
                    next.push(0usize);
                    let done = std::mem::replace(&mut bounds, next);
                    blocks.push(Self::over(&parts, &texts, first, (j, at), done)?);
                    first = (j, at);
                    base = -(at as isize);
                }
            }
            base += text.len() as isize;
        }
        if !last {
            return Ok((blocks, first.0, first.1));
        }
        let end = base as usize;
        if *bounds.last().unwrap_or(&0) < end {
            bounds.push(end);
        }
        if bounds.len() > 1 {
            blocks.push(Self::over(&parts, &texts, first, (texts.len() - 1, texts.last().map_or(0, |t| t.len())), bounds)?);
        }
        Ok((blocks, parts.len(), 0))
    }

    /// Line i's first `n` bytes at most: what a reader needs of a line it will refuse
    /// as too long, without copying all of it.
    fn head<'py>(&self, py: Python<'py>, i: usize, n: usize) -> PyResult<Bound<'py, PyBytes>> {
        if i >= self.len() {
            return Err(PyIndexError::new_err("line index out of range"));
        }
        let line = self.line(self.data(py), i);
        Ok(PyBytes::new(py, &line[..line.len().min(n)]))
    }

    fn __len__(&self) -> usize {
        self.len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, index: &Bound<'py, PyAny>) -> PyResult<PyObject> {
        let n = self.len();
        if let Ok(slice) = index.downcast::<PySlice>() {
            let s = slice.indices(n as isize)?;
            if s.step == 1 {
                let to = s.stop.max(s.start) as usize;
                return Ok(self.to_list(py, s.start as usize, to)?.into_any().unbind());
            }
            // any other step: as a list slices
            return Ok(self.to_list(py, 0, n)?.as_any().get_item(index)?.unbind());
        }
        let i: isize = index.extract()?;
        let i = if i < 0 { i + n as isize } else { i };
        if i < 0 || i as usize >= n {
            return Err(PyIndexError::new_err("line index out of range"));
        }
        Ok(PyBytes::new(py, self.line(self.data(py), i as usize)).into_any().unbind())
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_list(py, 0, self.len())?.try_iter().map(Bound::into_any)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.to_list(py, 0, self.len())?.as_any().eq(other)
    }

    fn __repr__(&self) -> String {
        format!("<LineBlock of {} lines>", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::find_newline;

    #[test]
    fn the_first_newline_is_found_wherever_it_falls_in_a_word() {
        for len in 0..40 {
            for at in 0..len {
                let mut s = vec![b'x'; len];
                s[at] = b'\n';
                if at + 1 < len {
                    s[len - 1] = b'\n';
                }
                assert_eq!(find_newline(&s), Some(at), "len {len}, at {at}");
            }
            assert_eq!(find_newline(&vec![0x8a_u8; len]), None);
        }
    }
}
