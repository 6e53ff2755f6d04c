//! Where a finished record goes: the extension's Tally and CSV writer take the Rust value
//! (rec.rs), any other receiver its dict. Apart from rec.rs so that the record values do
//! not depend on the receivers that read them.

use std::cell::RefCell;

use pyo3::prelude::*;

use crate::names::Names;
use crate::rec::Rec;
use crate::records::CsvBlocks;
use crate::request_ends::RequestEnds;
use crate::tally::Tally;

/// A finished record to `emit`: to a Tally, as it is (no dict is made), then on to the
/// Tally's `forward`, if any; to the CSV writer (records.rs's CsvBlocks), as it is; to
/// profile check's RequestEnds, as it is; to anything else, as its dict.
pub fn deliver(py: Python<'_>, emit: &PyObject, rec: &Rec, names: &RefCell<Names>) -> PyResult<()> {
    let target = emit.bind(py);
    if let Ok(tally) = target.downcast::<Tally>() {
        if let Ok(mut tally) = tally.try_borrow_mut() {
            tally.tally_rec(py, rec, names)?;
            let forward = tally.forward.as_ref().map(|f| f.clone_ref(py));
            drop(tally);
            return match forward {
                Some(forward) => deliver(py, &forward, rec, names),
                None => Ok(()),
            };
        }
    }
    if let Ok(blocks) = target.downcast::<CsvBlocks>() {
        if let Ok(mut blocks) = blocks.try_borrow_mut() {
            return blocks.write_rec(py, rec, names);
        }
    }
    if let Ok(ends) = target.downcast::<RequestEnds>() {
        return ends.get().take(py, rec);
    }
    emit.call1(py, (rec.to_dict(py, names)?,))?;
    Ok(())
}
