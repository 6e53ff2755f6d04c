//! The differential check of the envelope's steps against PCRE2, for the tests
//! (tests/parsers/test_envelope_steps.py): every line read both ways, as the line scanner
//! would (src/scan.rs), and the lines they read differently.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::envelope_steps::EnvelopeSteps;
use crate::jit::Pattern;

/// What one way read in a line: no match, or the mark, the envelope's groups, where the
/// envelope ended and the roles' groups.
type Reading = Option<(Option<usize>, Vec<Option<(usize, usize)>>, usize, Vec<Option<(usize, usize)>>)>;

/// Each line matched by `combined` (the marked pattern with an empty group `()` right after
/// the envelope, whose `envelope_groups` groups come first) and by the steps then `roles`
/// from the envelope's end, as FastLines does: (lines both matched, lines either matched,
/// up to 20 lines read differently, with both readings as text).
#[pyfunction]
pub(crate) fn envelope_differences(
    program: Vec<(String, Vec<i64>, Vec<u8>)>,
    envelope_groups: usize,
    combined: &str,
    roles: &str,
    lines: Vec<Vec<u8>>,
) -> PyResult<(usize, usize, Vec<(usize, String, String)>)> {
    let mut steps = EnvelopeSteps::new(program, envelope_groups).map_err(PyValueError::new_err)?;
    let mut combined = Pattern::new(combined).map_err(PyValueError::new_err)?;
    let mut roles = Pattern::new(roles).map_err(PyValueError::new_err)?;
    let role_groups = roles.captures_len() - 1;
    if combined.captures_len() != envelope_groups + 2 + role_groups {
        return Err(PyValueError::new_err("the combined pattern's groups are not the envelope's, one, and the roles'"));
    }
    let (mut both, mut either, mut differences) = (0, 0, Vec::new());
    for (i, line) in lines.iter().enumerate() {
        let by_pcre2: Reading = (combined.find_at(line, 0) == Ok(true)).then(|| {
            (
                combined.mark_number(),
                (1..=envelope_groups).map(|g| combined.get(g)).collect(),
                combined.get(envelope_groups + 1).map_or(usize::MAX, |s| s.0),
                (1..=role_groups).map(|g| combined.get(envelope_groups + 1 + g)).collect(),
            )
        });
        let by_steps: Reading = steps.run(line).and_then(|end| {
            (roles.find_at(line, end) == Ok(true)).then(|| {
                (
                    roles.mark_number(),
                    (1..=envelope_groups).map(|g| steps.get(g)).collect(),
                    end,
                    (1..=role_groups).map(|g| roles.get(g)).collect(),
                )
            })
        });
        both += usize::from(by_pcre2.is_some() && by_steps.is_some());
        either += usize::from(by_pcre2.is_some() || by_steps.is_some());
        if by_pcre2 != by_steps && differences.len() < 20 {
            differences.push((i, format!("{by_pcre2:?}"), format!("{by_steps:?}")));
        }
    }
    Ok((both, either, differences))
}
