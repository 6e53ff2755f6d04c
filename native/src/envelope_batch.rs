//! A batch of raw-lines records planned without Python per record: the common case of
//! PartitionState.feed_batch (streams/kafka/state.py; its Python twin there, plan_runs,
//! is the reference). Each record is decoded (envelope.rs), its file's duplicate mark
//! moved when the line is simply the file's next one, and consecutive lines of one file
//! received at the same time gathered into one run. The plan stops at the first record
//! that needs Python's judgement: an envelope the compiled decoder leaves to Python (bad
//! or off rsyslog's form), a file without a mark yet or whose mark is off the common form
//! (a jump held, an older worker's), and a line that is not its file's next one (a
//! duplicate, a rotation, a jump). Python takes that record through feed_record's path.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySet, PyString, PyTuple};

use crate::envelope::{decoded_fields, name, new_str, Decoded};

/// The file of the run being planned: its names, its marks key and its mark, with the
/// mark's high-water offset and where its next line starts as the plan moved them
/// (written back to the mark when the plan leaves the file: `put_back`).
struct File<'py> {
    host: String,
    path: String,
    names: (Bound<'py, PyString>, Bound<'py, PyString>),
    key: Bound<'py, PyTuple>,
    mark: Bound<'py, PyList>,
    high: i64,
    next_at: i64,
    dirty: bool,
}

impl File<'_> {
    /// The mark as moved (nothing when no line of the file was planned).
    fn put_back(&self) -> PyResult<()> {
        if self.dirty {
            self.mark.set_item(0, self.high)?;
            self.mark.set_item(3, self.next_at)?;
        }
        Ok(())
    }
}

/// (runs, next): the runs [(host, path, received_ms, [line, ...]), ...] of
/// messages[start:next] (each with a .value() method: confluent_kafka.Message, or
/// lines_fetch.Record), their files' marks moved and in `dirty`;
/// `next` is the index of the record Python must take (len(messages) when none).
#[pyfunction]
pub fn plan_batch<'py>(
    messages: &Bound<'py, PyList>,
    start: usize,
    marks: &Bound<'py, PyDict>,
    dirty: &Bound<'py, PySet>,
) -> PyResult<(Bound<'py, PyList>, usize)> {
    let runs = PyList::empty(messages.py());
    let mut file: Option<File<'py>> = None;
    let planned = plan(messages, start, marks, dirty, &runs, &mut file);
    // the last file's mark as moved, whether the plan ended or failed (as the marks are
    // moved in place record by record in plan_runs)
    let put = file.as_ref().map_or(Ok(()), File::put_back);
    let next = planned?;
    put?;
    Ok((runs, next))
}

fn plan<'py>(
    messages: &Bound<'py, PyList>,
    start: usize,
    marks: &Bound<'py, PyDict>,
    dirty: &Bound<'py, PySet>,
    runs: &Bound<'py, PyList>,
    file: &mut Option<File<'py>>,
) -> PyResult<usize> {
    let py = messages.py();
    let value_name = pyo3::intern!(py, "value");
    let mut run: Option<(Option<i64>, Bound<'py, PyList>)> = None; // its time, its lines
    let mut i = start;
    while i < messages.len() {
        let value = messages.get_item(i)?.call_method0(value_name)?;
        let Ok(raw) = value.downcast::<PyBytes>() else { break };
        let Some(Decoded { host, path, offset, received_ms, line }) = decoded_fields(raw.as_bytes()) else {
            break;
        };
        if !matches!(&*file, Some(f) if f.host == host && f.path == path) {
            if let Some(f) = file.take() {
                f.put_back()?;
            }
            let names = (name(py, &host), name(py, &path));
            let key = PyTuple::new(py, [&names.0, &names.1])?;
            let Some(mark) = marks.get_item(&key)? else { break };
            let Ok(mark) = mark.downcast_into::<PyList>() else { break };
            if mark.len() != 4 {
                break; // a jump held: Python's _admit decides
            }
            let (Ok(high), Ok(next_at)) = (mark.get_item(0)?.extract::<i64>(), mark.get_item(3)?.extract::<i64>()) else {
                break; // not known where the next line starts (an older worker's mark)
            };
            *file = Some(File { host: host.into_owned(), path: path.into_owned(), names, key, mark, high, next_at, dirty: false });
            run = None;
        }
        let f = file.as_mut().expect("set above");
        if !(f.high < offset && offset <= f.next_at.saturating_add(1)) {
            break; // a duplicate, a rotation or a jump: Python's _admit decides
        }
        // state._next_at: the line's UTF-8 bytes and the newline
        let Some(line_next) = offset.checked_add(line.len() as i64 + 1) else { break };
        f.high = offset;
        f.next_at = line_next;
        if !f.dirty {
            dirty.add(&f.key)?;
            f.dirty = true;
        }
        if !matches!(&run, Some((ms, _)) if *ms == received_ms) {
            let lines = PyList::empty(py);
            runs.append((&f.names.0, &f.names.1, received_ms, &lines))?;
            run = Some((received_ms, lines));
        }
        run.as_ref().expect("set above").1.append(new_str(py, &line)?)?;
        i += 1;
    }
    Ok(i)
}
