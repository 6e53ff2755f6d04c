//! Where a finished record goes: the extension's Tally takes the Rust value (rec.rs),
//! any other receiver its dict. Apart from rec.rs so that the record values do not depend
//! on the Tally that reads them.

use std::cell::RefCell;

use pyo3::prelude::*;

use crate::names::Names;
use crate::rec::Rec;
use crate::tally::Tally;

/// A finished record to `emit`: to a Tally that forwards nothing, as it is (no dict is
/// made); to anything else, as its dict.
pub fn deliver(py: Python<'_>, emit: &PyObject, rec: &Rec, names: &RefCell<Names>) -> PyResult<()> {
    if let Ok(tally) = emit.bind(py).downcast::<Tally>() {
        if let Ok(mut tally) = tally.try_borrow_mut() {
            if tally.forward.is_none() {
                return tally.tally_rec(py, rec, names);
            }
        }
    }
    emit.call1(py, (rec.to_dict(py, names)?,))?;
    Ok(())
}
