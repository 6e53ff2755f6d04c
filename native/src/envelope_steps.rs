//! A line's envelope read by the steps parsers/envelope_steps.py compiled from the
//! profile's own envelope pattern (primitive: depends on no other module).
//!
//! The compiler accepts an envelope only where matching it greedily, without ever going
//! back, gives PCRE2's match and groups (its module says why); this runs those steps: about
//! a tenth of what PCRE2's JIT spent on the envelope part of the combined pattern (issue 30).
//! The only going back is the proof's one fallback: an optional group at the envelope's end
//! whose body fails is skipped, its groups unset, as PCRE2 would.

/// A group's bounds while unset.
const UNSET: (usize, usize) = (usize::MAX, usize::MAX);

/// Held in the step itself: one load a byte, no pointer to follow.
type ByteSet = [bool; 256];

enum Step {
    Lit(Box<[u8]>),
    /// `group`: the run is the whole of that group (0: of none), its open and close
    /// steps folded in (each step costs its dispatch; the DPM envelope's nine groups are
    /// each one run).
    Run { set: ByteSet, min: usize, max: usize, group: usize },
    Open(usize),
    Close(usize),
    /// Enter the body (the next step) where the next byte is in `first`, else go to `skip`;
    /// `fallback`: the body failing skips it with groups lo..hi unset.
    Opt { first: ByteSet, skip: usize, fallback: Option<(usize, usize)> },
    EndOpt { fallback: bool },
    Branch(Vec<(ByteSet, usize)>),
    Jump(usize),
}

/// A compiled envelope and the groups of its last match.
pub(crate) struct EnvelopeSteps {
    steps: Vec<Step>,
    groups: Vec<(usize, usize)>,
    opened: Vec<usize>,
    /// Optional groups entered with a fallback: (position, skip, lo, hi).
    frames: Vec<(usize, usize, usize, usize)>,
}

fn byte_set(bitmap: &[u8]) -> Result<ByteSet, String> {
    if bitmap.len() != 32 {
        return Err("a byte set is a 32-byte bitmap".into());
    }
    let mut set = [false; 256];
    for (b, member) in set.iter_mut().enumerate() {
        *member = bitmap[b >> 3] & (1 << (b & 7)) != 0;
    }
    Ok(set)
}

impl EnvelopeSteps {
    /// The steps of parsers/envelope_steps.py's program, for an envelope of `groups`
    /// capture groups (numbered from 1), or what is wrong with them.
    pub(crate) fn new(program: Vec<(String, Vec<i64>, Vec<u8>)>, groups: usize) -> Result<Self, String> {
        let len = program.len();
        let index = |n: i64, bound: usize| -> Result<usize, String> {
            usize::try_from(n).ok().filter(|&i| i <= bound).ok_or_else(|| format!("step index {n} out of range"))
        };
        let group = |numbers: &[i64]| -> Result<usize, String> {
            match numbers {
                [g] if (1..=groups as i64).contains(g) => Ok(*g as usize),
                _ => Err(format!("bad group in {numbers:?}")),
            }
        };
        let mut steps = Vec::with_capacity(len);
        for (kind, numbers, bytes) in program {
            steps.push(match (kind.as_str(), numbers.as_slice()) {
                ("lit", []) if !bytes.is_empty() => Step::Lit(bytes.into_boxed_slice()),
                ("run", &[min, max]) if min >= 0 && (max == -1 || max >= min.max(1)) => Step::Run {
                    set: byte_set(&bytes)?,
                    min: min as usize,
                    max: if max < 0 { usize::MAX } else { max as usize },
                    group: 0,
                },
                ("open", n) => Step::Open(group(n)?),
                ("close", n) => Step::Close(group(n)?),
                ("opt", &[skip, fallback, lo, hi]) => Step::Opt {
                    first: byte_set(&bytes)?,
                    skip: index(skip, len)?,
                    fallback: match fallback {
                        0 => None,
                        _ => Some((index(lo, groups + 1)?, index(hi, groups + 1)?)),
                    },
                },
                ("endopt", &[fallback]) => Step::EndOpt { fallback: fallback != 0 },
                ("branch", targets) if bytes.len() == 32 * targets.len() => Step::Branch(
                    targets
                        .iter()
                        .zip(bytes.chunks(32))
                        .map(|(&t, set)| Ok((byte_set(set)?, index(t, len)?)))
                        .collect::<Result<_, String>>()?,
                ),
                ("jump", &[target]) => Step::Jump(index(target, len)?),
                _ => return Err(format!("unknown step {kind} {numbers:?}")),
            });
        }
        if let Some(Step::Opt { fallback: Some((lo, hi)), .. }) =
            steps.iter().find(|s| matches!(s, Step::Opt { fallback: Some((lo, hi)), .. } if lo > hi))
        {
            return Err(format!("bad group range {lo}..{hi}"));
        }
        let steps = fold_groups(steps);
        Ok(EnvelopeSteps { steps, groups: vec![UNSET; groups + 1], opened: vec![0; groups + 1], frames: Vec::new() })
    }

    /// Where the envelope at the start of `line` ends, None if the line has none.
    pub(crate) fn run(&mut self, line: &[u8]) -> Option<usize> {
        // Locals, not fields: a write to a group cannot change a step, and the compiler
        // knows it (no reloads of the steps after each write).
        let steps = &self.steps[..];
        let groups = &mut self.groups[..];
        let opened = &mut self.opened[..];
        let frames = &mut self.frames;
        groups.fill(UNSET);
        frames.clear();
        let (mut pc, mut pos) = (0usize, 0usize);
        while pc < steps.len() {
            let matched = match &steps[pc] {
                Step::Lit(text) => {
                    let hit = line.get(pos..pos + text.len()).is_some_and(|seen| seen == &text[..]);
                    pos += if hit { text.len() } else { 0 };
                    hit
                }
                Step::Run { set, min, max, group } => {
                    let limit = line.len().min(pos.saturating_add(*max));
                    let start = pos;
                    while pos < limit && set[usize::from(line[pos])] {
                        pos += 1;
                    }
                    let hit = pos - start >= *min;
                    if hit && *group != 0 {
                        groups[*group] = (start, pos);
                    }
                    hit
                }
                Step::Open(g) => {
                    opened[*g] = pos;
                    true
                }
                Step::Close(g) => {
                    groups[*g] = (opened[*g], pos);
                    true
                }
                Step::Opt { first, skip, fallback } => {
                    if pos < line.len() && first[usize::from(line[pos])] {
                        if let Some((lo, hi)) = *fallback {
                            frames.push((pos, *skip, lo, hi));
                        }
                    } else {
                        pc = *skip;
                        continue;
                    }
                    true
                }
                Step::EndOpt { fallback } => {
                    if *fallback {
                        frames.pop();
                    }
                    true
                }
                Step::Branch(arms) => match line.get(pos).and_then(|&b| arms.iter().find(|(set, _)| set[usize::from(b)])) {
                    Some(&(_, target)) => {
                        pc = target;
                        continue;
                    }
                    None => false,
                },
                Step::Jump(target) => {
                    pc = *target;
                    continue;
                }
            };
            if matched {
                pc += 1;
            } else {
                // a run that failed moved pos: the frame restores it, or there is no match
                let (at, skip, lo, hi) = frames.pop()?;
                groups[lo..hi].fill(UNSET);
                pos = at;
                pc = skip;
            }
        }
        Some(pos)
    }

    /// Group `g`'s span in the last match, None if it did not take part.
    #[inline]
    pub(crate) fn get(&self, g: usize) -> Option<(usize, usize)> {
        self.groups.get(g).copied().filter(|&s| s != UNSET)
    }

    /// The groups, group 0 (unused) included.
    pub(crate) fn groups_len(&self) -> usize {
        self.groups.len()
    }
}

/// The steps with each `Open(g), Run, Close(g)` folded into the run, and the jump
/// targets moved to match (a triple a jump lands inside of stays as it is).
fn fold_groups(steps: Vec<Step>) -> Vec<Step> {
    let mut landed = vec![false; steps.len() + 1];
    for step in &steps {
        match step {
            Step::Opt { skip, .. } => landed[*skip] = true,
            Step::Jump(t) => landed[*t] = true,
            Step::Branch(arms) => arms.iter().for_each(|(_, t)| landed[*t] = true),
            _ => {}
        }
    }
    // where a folded triple starts
    let mut starts = vec![false; steps.len()];
    let mut i = 0;
    while i < steps.len() {
        starts[i] = match (&steps[i], steps.get(i + 1), steps.get(i + 2)) {
            (Step::Open(g), Some(Step::Run { group: 0, .. }), Some(Step::Close(c))) => g == c && !landed[i + 1] && !landed[i + 2],
            _ => false,
        };
        i += if starts[i] { 3 } else { 1 };
    }
    let mut moved = vec![0; steps.len() + 1];
    let (mut i, mut at) = (0, 0);
    while i < steps.len() {
        let width = if starts[i] { 3 } else { 1 };
        moved[i..i + width].fill(at);
        i += width;
        at += 1;
    }
    moved[steps.len()] = at;
    let mut steps: Vec<Option<Step>> = steps.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(at);
    let mut i = 0;
    while i < steps.len() {
        if starts[i] {
            let (Some(Step::Open(group)), Some(Step::Run { set, min, max, .. })) = (steps[i].take(), steps[i + 1].take()) else {
                unreachable!("a folded triple opens with its group and a run")
            };
            out.push(Step::Run { set, min, max, group });
            i += 3;
            continue;
        }
        out.push(match steps[i].take().expect("each step taken once") {
            Step::Opt { first, skip, fallback } => Step::Opt { first, skip: moved[skip], fallback },
            Step::Jump(t) => Step::Jump(moved[t]),
            Step::Branch(arms) => Step::Branch(arms.into_iter().map(|(set, t)| (set, moved[t])).collect()),
            other => other,
        });
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::EnvelopeSteps;

    fn bitmap(bytes: &[u8]) -> Vec<u8> {
        let mut bits = vec![0u8; 32];
        for &b in bytes {
            bits[usize::from(b >> 3)] |= 1 << (b & 7);
        }
        bits
    }

    fn step(kind: &str, numbers: &[i64], bytes: &[u8]) -> (String, Vec<i64>, Vec<u8>) {
        (kind.into(), numbers.to_vec(), bytes.to_vec())
    }

    /// `(\d+)(?:,(\d+))? x` with the envelope's end after it, and `(?:\[(\d+)\]: )?` at the end.
    fn steps() -> EnvelopeSteps {
        let digits = bitmap(b"0123456789");
        let program = vec![
            step("open", &[1], b""),
            step("run", &[1, -1], &digits),
            step("close", &[1], b""),
            step("opt", &[9, 0, 0, 0], &bitmap(b",")),
            step("lit", &[], b","),
            step("open", &[2], b""),
            step("run", &[1, -1], &digits),
            step("close", &[2], b""),
            step("endopt", &[0], b""),
            step("lit", &[], b" x"),
            step("opt", &[17, 1, 3, 4], &bitmap(b"[")),
            step("lit", &[], b"["),
            step("open", &[3], b""),
            step("run", &[1, -1], &digits),
            step("close", &[3], b""),
            step("lit", &[], b"]: "),
            step("endopt", &[1], b""),
        ];
        EnvelopeSteps::new(program, 3).unwrap()
    }

    #[test]
    fn it_reads_the_groups_greedily_and_skips_an_optional_group_the_next_byte_does_not_open() {
        let mut s = steps();
        assert_eq!(s.run(b"12,34 x[5]: rest"), Some(12));
        assert_eq!((s.get(1), s.get(2), s.get(3)), (Some((0, 2)), Some((3, 5)), Some((8, 9))));
        assert_eq!(s.run(b"12 xyz"), Some(4));
        assert_eq!((s.get(1), s.get(2), s.get(3)), (Some((0, 2)), None, None));
    }

    #[test]
    fn a_failing_optional_group_at_the_end_is_skipped_with_its_groups_unset_and_elsewhere_fails() {
        let mut s = steps();
        assert_eq!(s.run(b"12 x[5]; rest"), Some(4));
        assert_eq!(s.get(3), None);
        assert_eq!(s.run(b"12,x"), None, "a comma opens the group, which then fails: no envelope");
        assert_eq!(s.run(b"x"), None);
        assert_eq!(s.run(b""), None);
    }

    #[test]
    fn each_group_that_is_one_run_is_folded_into_it_and_the_jumps_follow() {
        let s = steps();
        assert_eq!(s.steps.len(), 17 - 3 * 2, "the three groups folded, the opt targets moved");
        assert!(matches!(s.steps[1], super::Step::Opt { skip: 5, .. }));
    }

    #[test]
    fn a_program_out_of_its_bounds_is_refused() {
        assert!(EnvelopeSteps::new(vec![step("jump", &[5], b"")], 0).is_err());
        assert!(EnvelopeSteps::new(vec![step("open", &[2], b"")], 1).is_err());
        assert!(EnvelopeSteps::new(vec![step("run", &[1, 2], b"\x00")], 1).is_err());
        assert!(EnvelopeSteps::new(vec![step("what", &[], b"")], 1).is_err());
    }
}
