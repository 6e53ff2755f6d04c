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

type ByteSet = Box<[bool; 256]>;

enum Step {
    Lit(Box<[u8]>),
    Run { set: ByteSet, min: usize, max: usize },
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
    let mut set = Box::new([false; 256]);
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
        Ok(EnvelopeSteps { steps, groups: vec![UNSET; groups + 1], opened: vec![0; groups + 1], frames: Vec::new() })
    }

    /// Where the envelope at the start of `line` ends, None if the line has none.
    pub(crate) fn run(&mut self, line: &[u8]) -> Option<usize> {
        self.groups.fill(UNSET);
        self.frames.clear();
        let (mut pc, mut pos) = (0usize, 0usize);
        while let Some(step) = self.steps.get(pc) {
            let matched = match step {
                Step::Lit(text) => {
                    let hit = line.get(pos..pos + text.len()) == Some(&text[..]);
                    pos += if hit { text.len() } else { 0 };
                    hit
                }
                Step::Run { set, min, max } => {
                    let rest = &line[pos..];
                    let limit = rest.len().min(*max);
                    let n = rest[..limit].iter().position(|&b| !set[usize::from(b)]).unwrap_or(limit);
                    pos += if n >= *min { n } else { 0 };
                    n >= *min
                }
                Step::Open(g) => {
                    self.opened[*g] = pos;
                    true
                }
                Step::Close(g) => {
                    self.groups[*g] = (self.opened[*g], pos);
                    true
                }
                Step::Opt { first, skip, fallback } => {
                    if line.get(pos).is_some_and(|&b| first[usize::from(b)]) {
                        if let Some((lo, hi)) = *fallback {
                            self.frames.push((pos, *skip, lo, hi));
                        }
                    } else {
                        pc = *skip;
                        continue;
                    }
                    true
                }
                Step::EndOpt { fallback } => {
                    if *fallback {
                        self.frames.pop();
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
                let (at, skip, lo, hi) = self.frames.pop()?;
                self.groups[lo..hi].fill(UNSET);
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
    fn a_program_out_of_its_bounds_is_refused() {
        assert!(EnvelopeSteps::new(vec![step("jump", &[5], b"")], 0).is_err());
        assert!(EnvelopeSteps::new(vec![step("open", &[2], b"")], 1).is_err());
        assert!(EnvelopeSteps::new(vec![step("run", &[1, 2], b"\x00")], 1).is_err());
        assert!(EnvelopeSteps::new(vec![step("what", &[], b"")], 1).is_err());
    }
}
