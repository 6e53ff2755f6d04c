//! Lines split in the extension: replay reads an archive a megabyte at a time, cut by
//! streams/linecut's rule (so no line here is longer than about a read), and hands
//! the engine blocks of lines over those buffers (streams/inputs.iter_chunks), not lists of
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
    /// The read buffers (bytes, or memoryviews of them) the lines lie in, held while the
    /// block lives: a block that spans reads points into each of them rather than copying
    /// them into bytes of its own (a DOME block of 8,192 lines is about 1.4 MiB, more
    /// than a read, so nearly every one spanned two: 3.4% of a DOME replay's instructions
    /// went to that copy, and the page faults of a fresh 1.4 MiB each time). Held, never
    /// read: `lines` points into them.
    #[allow(dead_code)]
    held: Vec<PyBuffer<u8>>,
    /// Copies of the few lines that run from one buffer into the next (the line a read
    /// cut, one a read at most): each line must be one run of bytes. Held, as `held` is.
    #[allow(dead_code)]
    joined: Box<[u8]>,
    /// Line i is at address lines[i].0, lines[i].1 bytes long, its newline included, in
    /// `held` or `joined`.
    lines: Vec<(usize, usize)>,
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

/// The block being filled by a LineSplitter: its lines in the parts where they lie, a line
/// across parts copied into `joined` (its offset there kept until the copy stops growing).
/// It outlives the call that started it (a DOME block of 8,192 lines is more than a read),
/// so each line's end is found once, not again with every read until the block is full.
/// (The buffers of earlier calls it holds are the LineSplitter's `held`, beside it.)
struct Filling {
    /// The parts of this call its lines lie in (indices into its `texts`), in order.
    held_here: Vec<usize>,
    joined: Vec<u8>,
    across: Vec<usize>,
    lines: Vec<(usize, usize)>,
    /// Bytes of its lines, newlines included.
    bytes: usize,
}

impl Filling {
    fn new(room: usize) -> Self {
        Filling {
            held_here: Vec::new(),
            joined: Vec::new(),
            across: Vec::new(),
            lines: Vec::with_capacity(room),
            bytes: 0,
        }
    }

    /// Add the line from `from` (part, offset) to `to` (part, offset after its newline).
    #[inline]
    fn add(&mut self, texts: &[&[u8]], from: (usize, usize), to: (usize, usize)) {
        if from.0 == to.0 {
            if self.held_here.last() != Some(&to.0) {
                self.held_here.push(to.0);
            }
            self.lines.push((texts[to.0].as_ptr() as usize + from.1, to.1 - from.1));
            self.bytes += to.1 - from.1;
        } else {
            self.add_across(&[], texts, from, to);
        }
    }

    /// add() of a line that starts in an earlier part than it ends, or in the bytes
    /// `before` the parts (the unfinished line of an earlier call): one a read at most,
    /// kept out of the loop over every line.
    #[cold]
    #[inline(never)]
    fn add_across(&mut self, before: &[u8], texts: &[&[u8]], mut from: (usize, usize), to: (usize, usize)) {
        // a line that starts at a part's end starts in the next one
        while before.is_empty() && from.0 < to.0 && from.1 == texts[from.0].len() {
            from = (from.0 + 1, 0);
        }
        if before.is_empty() && from.0 == to.0 {
            return self.add(texts, from, to);
        }
        let at = self.joined.len();
        self.joined.extend_from_slice(before);
        if from.0 < to.0 {
            self.joined.extend_from_slice(&texts[from.0][from.1..]);
            for text in &texts[from.0 + 1..to.0] {
                self.joined.extend_from_slice(text);
            }
            self.joined.extend_from_slice(&texts[to.0][..to.1]);
        } else {
            self.joined.extend_from_slice(&texts[to.0][from.1..to.1]);
        }
        self.add_joined(at);
    }

    /// Add the line copied to `joined` from `at` on.
    fn add_joined(&mut self, at: usize) {
        self.across.push(self.lines.len());
        self.lines.push((at, self.joined.len() - at));
        self.bytes += self.joined.len() - at;
    }

    /// The parts of this call its lines lie in, added to `held` to be held beyond it.
    fn hold(&mut self, parts: &[Bound<'_, PyAny>], held: &mut Vec<PyBuffer<u8>>) -> PyResult<()> {
        for j in self.held_here.drain(..) {
            held.push(PyBuffer::<u8>::get(&parts[j])?);
        }
        Ok(())
    }

    /// The block of its lines, holding `held` (the buffers of earlier calls they lie in)
    /// and the parts of this call they lie in.
    fn block(mut self, parts: &[Bound<'_, PyAny>], mut held: Vec<PyBuffer<u8>>) -> PyResult<LineBlock> {
        self.hold(parts, &mut held)?;
        let joined = self.joined.into_boxed_slice();
        let mut lines = self.lines;
        for &i in &self.across {
            lines[i].0 += joined.as_ptr() as usize;
        }
        Ok(LineBlock { held, joined, lines })
    }
}

impl LineBlock {
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Line i, its newline included (i < len()).
    pub fn line(&self, i: usize) -> &[u8] {
        let (at, len) = self.lines[i];
        // SAFETY: the line lies in a buffer the block holds (`held`, read-only, or
        // `joined`, never changed), for as long as the block lives.
        unsafe { std::slice::from_raw_parts(at as *const u8, len) }
    }

    fn to_list<'py>(&self, py: Python<'py>, from: usize, to: usize) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, (from..to).map(|i| PyBytes::new(py, self.line(i))))
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
        let mut splitter = LineSplitter::new(size);
        let mut blocks = splitter.split(vec![data.into_any()])?;
        if last {
            blocks.extend(splitter.finish()?);
            return Ok((blocks, len));
        }
        Ok((blocks, len - splitter.carried()))
    }

    /// Line i's first `n` bytes at most: what a reader needs of a line it will refuse
    /// as too long, without copying all of it.
    fn head<'py>(&self, py: Python<'py>, i: usize, n: usize) -> PyResult<Bound<'py, PyBytes>> {
        if i >= self.len() {
            return Err(PyIndexError::new_err("line index out of range"));
        }
        let line = self.line(i);
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
        Ok(PyBytes::new(py, self.line(i as usize)).into_any().unbind())
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

/// Splits the texts one input's reads make, in turn, into LineBlocks of `size` lines
/// (streams/inputs.iter_chunks): the read-only buffers (bytes, or memoryviews of them)
/// of each read are split where they lie, a block holding those its lines are in and
/// copying only a line that runs across two. The block not yet full is kept, with its
/// line table and its buffers, until the next read completes it, so each line's end is
/// found once (a DOME block is more than a read: its lines were found again at each read).
#[pyclass(module = "dpmstream.parsers._native")]
pub struct LineSplitter {
    size: usize,
    filling: Filling,
    /// The buffers of earlier calls the filling's lines lie in.
    held: Vec<PyBuffer<u8>>,
    /// The bytes after the last newline given (an unfinished line), copied: what
    /// streams/inputs hands over ends at a newline, so this is empty but for other callers.
    tail: Vec<u8>,
}

impl LineSplitter {
    /// The line table a new block starts with: none, grown as its lines come. One made
    /// whole (8,192 entries, 128 KiB) when the last block filled, and kept while the reads
    /// come, took the peak RSS of the 1 M DOME replays up 1-2 MiB (glibc placed it among
    /// the 1 MiB read buffers); grown, they are as before, and the CPU gain the same.
    fn room(&self) -> usize {
        0
    }
}

#[pymethods]
impl LineSplitter {
    #[new]
    fn new(size: usize) -> Self {
        let size = size.max(1);
        LineSplitter { size, filling: Filling::new(0), held: Vec::new(), tail: Vec::new() }
    }

    /// The blocks the text of `parts` (read-only buffers, in turn) completes, with the
    /// lines carried from earlier calls; the rest is carried to the next.
    fn split(&mut self, parts: Vec<Bound<'_, PyAny>>) -> PyResult<Vec<LineBlock>> {
        let views = parts.iter().map(PyBuffer::<u8>::get).collect::<PyResult<Vec<_>>>()?;
        let mut texts: Vec<&[u8]> = Vec::with_capacity(views.len());
        for view in &views {
            if !view.is_c_contiguous() {
                return Err(PyValueError::new_err("a part is not a contiguous buffer"));
            }
            // A block points into the parts: one that could change under it would change
            // its lines.
            if !view.readonly() {
                return Err(PyValueError::new_err("a part is not a read-only buffer"));
            }
            // SAFETY: the buffer is held (views) while the slice is used, and read only.
            texts.push(unsafe { std::slice::from_raw_parts(view.buf_ptr() as *const u8, view.len_bytes()) });
        }
        let mut blocks = Vec::new();
        // The line being read starts at `start` (part, offset), after the tail if any.
        let mut start = (0usize, 0usize);
        for (j, text) in texts.iter().enumerate() {
            let mut at = if j == start.0 { start.1 } else { 0 };
            while let Some(p) = find_newline(&text[at..]) {
                at += p + 1;
                if self.tail.is_empty() {
                    self.filling.add(&texts, start, (j, at));
                } else {
                    self.filling.add_across(&self.tail, &texts, start, (j, at));
                    self.tail.clear();
                }
                start = (j, at);
                if self.filling.lines.len() == self.size {
                    let room = self.room();
                    let filling = std::mem::replace(&mut self.filling, Filling::new(room));
                    blocks.push(filling.block(&parts, std::mem::take(&mut self.held))?);
                }
            }
        }
        // what follows the last newline, if any, waits for the next
        for (j, text) in texts.iter().enumerate().skip(start.0) {
            self.tail.extend_from_slice(&text[if j == start.0 { start.1 } else { 0 }..]);
        }
        self.filling.hold(&parts, &mut self.held)?;
        Ok(blocks)
    }

    /// Bytes carried to the next call: the lines of the block not yet full, and an
    /// unfinished line.
    fn carried(&self) -> usize {
        self.filling.bytes + self.tail.len()
    }

    /// At the input's end (or to bound what is carried): what is carried as a block, none
    /// when nothing is (its final line may lack a newline). The splitter starts afresh.
    fn finish(&mut self) -> PyResult<Vec<LineBlock>> {
        if !self.tail.is_empty() {
            let at = self.filling.joined.len();
            self.filling.joined.append(&mut self.tail);
            self.filling.add_joined(at);
        }
        let room = self.room();
        let filling = std::mem::replace(&mut self.filling, Filling::new(room));
        let held = std::mem::take(&mut self.held);
        Ok(if filling.lines.is_empty() { Vec::new() } else { vec![filling.block(&[], held)?] })
    }
}

#[cfg(test)]
mod tests {
    use super::{find_newline, Filling};

    fn lines_of(filling: &Filling) -> Vec<Vec<u8>> {
        let mut lines = filling.lines.clone();
        for &i in &filling.across {
            lines[i].0 += filling.joined.as_ptr() as usize;
        }
        // SAFETY: the texts and `joined` outlive this, unchanged since the lines were added.
        lines.iter().map(|&(at, len)| unsafe { std::slice::from_raw_parts(at as *const u8, len) }.to_vec()).collect()
    }

    #[test]
    fn a_line_within_a_part_points_into_it_and_only_one_across_parts_is_copied() {
        let texts: [&[u8]; 4] = [b"a\nbb", b"", b"b", b"b\nc\n"];
        let mut filling = Filling::new(4);
        filling.add(&texts, (0, 0), (0, 2));
        filling.add(&texts, (0, 2), (3, 2));
        filling.add(&texts, (3, 2), (3, 4));
        assert_eq!(lines_of(&filling), [b"a\n".to_vec(), b"bbbb\n".to_vec(), b"c\n".to_vec()]);
        assert_eq!(filling.lines[0].0, texts[0].as_ptr() as usize);
        assert_eq!(filling.lines[2].0, texts[3].as_ptr() as usize + 2);
        assert_eq!(filling.joined, b"bbbb\n");
        assert_eq!(filling.held_here, [0, 3]);
    }

    #[test]
    fn a_line_that_starts_at_a_parts_end_lies_in_the_next_part_uncopied() {
        let texts: [&[u8]; 3] = [b"a\n", b"", b"b\n"];
        let mut filling = Filling::new(2);
        filling.add(&texts, (0, 0), (0, 2));
        filling.add(&texts, (0, 2), (2, 2));
        assert_eq!(lines_of(&filling), [b"a\n".to_vec(), b"b\n".to_vec()]);
        assert!(filling.joined.is_empty());
        assert_eq!(filling.held_here, [0, 2]);
    }

    #[test]
    fn a_line_begun_in_an_earlier_call_is_its_bytes_then_those_of_this_one() {
        let texts: [&[u8]; 2] = [b"ne", b"\r\nb\n"];
        let mut filling = Filling::new(2);
        filling.add_across(b"o", &texts, (0, 0), (1, 2));
        filling.add(&texts, (1, 2), (1, 4));
        assert_eq!(lines_of(&filling), [b"one\r\n".to_vec(), b"b\n".to_vec()]);
        assert_eq!(filling.bytes, 7);
        // within one part too, and the part's line after it uncopied
        let texts: [&[u8]; 1] = [b"ne\nb\n"];
        let mut filling = Filling::new(2);
        filling.add_across(b"o", &texts, (0, 0), (0, 3));
        filling.add(&texts, (0, 3), (0, 5));
        assert_eq!(lines_of(&filling), [b"one\n".to_vec(), b"b\n".to_vec()]);
        assert_eq!(filling.joined, b"one\n");
        assert_eq!(filling.held_here, [0]);
    }

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
