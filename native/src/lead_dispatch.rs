//! Which of a list of alternatives may match at a place of a line, each alternative
//! requiring its literal lead there (parsers/regex_lead.py): the DOME scanner's role
//! patterns (dome_scan.rs), tried in their order, only those the line's bytes allow
//! (primitive: depends on no other module).
//!
//! Tried in turn, a line of the 9th role failed 8 others first, each on its literal or
//! its regex's lead check, and a line of none (the catch-all) failed them all (issue 30).
//! Here a few places of the message, chosen where the leads differ most, each give by
//! their byte a mask of the alternatives whose lead has that byte there (or ends before
//! it); the masks' AND holds every alternative whose lead the line starts with, in their
//! order (bit i: alternative i), so skipping the others never changes which one matches
//! first.

/// The most alternatives a dispatch holds (one bit each).
pub(crate) const MAX: usize = 64;

/// The most places read: a mask each, ANDed per line.
const PLACES: usize = 4;

/// One place read: its offset from the message's start, the mask by the byte there, and
/// the mask where the line ends before it.
#[derive(Clone, Debug)]
struct Place {
    offset: usize,
    by_byte: Box<[u64; 256]>,
    past_end: u64,
}

/// The dispatch of one list of alternatives.
#[derive(Clone, Debug)]
pub(crate) struct LeadDispatch {
    places: Vec<Place>,
    all: u64,
}

impl LeadDispatch {
    /// The dispatch of alternatives with these leads (empty: no literal required), or
    /// None: more than MAX of them (then each is tried in turn).
    pub(crate) fn of(leads: &[&[u8]]) -> Option<LeadDispatch> {
        if leads.len() > MAX {
            return None;
        }
        let all = if leads.len() == MAX { u64::MAX } else { (1u64 << leads.len()) - 1 };
        let longest = leads.iter().map(|l| l.len()).max().unwrap_or(0);
        // allows[k][i]: the alternatives a line of lead i's (the lead, then anything)
        // leaves to try by its byte at place k (a mask each: built once, the scanner's
        // construction runs per profile tried)
        let allows: Vec<Vec<u64>> = (0..longest)
            .map(|k| {
                let mut by_byte = [bits(leads, |lead| lead.len() <= k); 256];
                for (j, lead) in leads.iter().enumerate() {
                    if let Some(&b) = lead.get(k) {
                        by_byte[usize::from(b)] |= 1 << j;
                    }
                }
                leads.iter().map(|lead| lead.get(k).map_or(all, |&b| by_byte[usize::from(b)])).collect()
            })
            .collect();
        // greedily, the place that leaves the fewest alternatives to try for a line of
        // each lead's; no place once one leaves no fewer
        let mut may = vec![all; leads.len()];
        let kept = |may: &[u64], k: usize| may.iter().zip(&allows[k]).map(|(m, a)| (m & a).count_ones()).sum::<u32>();
        let mut best = (leads.len() * leads.len()) as u32;
        let mut offsets: Vec<usize> = Vec::new();
        while offsets.len() < PLACES {
            let Some((n_kept, k)) = (0..longest).map(|k| (kept(&may, k), k)).min() else {
                break;
            };
            if n_kept >= best {
                break;
            }
            for (m, a) in may.iter_mut().zip(&allows[k]) {
                *m &= a;
            }
            best = n_kept;
            offsets.push(k);
        }
        let places = offsets
            .into_iter()
            .map(|offset| {
                let short = bits(leads, |lead| lead.len() <= offset);
                let mut by_byte = Box::new([0u64; 256]);
                for (b, mask) in by_byte.iter_mut().enumerate() {
                    *mask = short | bits(leads, |lead| lead.get(offset) == Some(&(b as u8)));
                }
                Place { offset, by_byte, past_end: short }
            })
            .collect();
        Some(LeadDispatch { places, all })
    }

    /// The alternatives that may match `line` at `at` (bit i: the ith): every one whose
    /// lead `line[at..]` starts with, and some others.
    #[inline]
    pub(crate) fn candidates(&self, line: &[u8], at: usize) -> u64 {
        let mut mask = self.all;
        for place in &self.places {
            mask &= match line.get(at + place.offset) {
                Some(&b) => place.by_byte[usize::from(b)],
                None => place.past_end,
            };
        }
        mask
    }
}

/// The mask of the leads that hold `test`.
fn bits(leads: &[&[u8]], test: impl Fn(&[u8]) -> bool) -> u64 {
    leads.iter().enumerate().filter(|(_, l)| test(l)).fold(0, |m, (i, _)| m | 1 << i)
}

#[cfg(test)]
mod tests {
    use super::{LeadDispatch, MAX};

    /// The bundled DOME profiles' role leads (regex_lead.lead of each `[roles]` pattern,
    /// in order: `returns`, `other` and `\S+` roles have none).
    const LEADS: &[&str] = &[
        "dome workerFunc : Accepted connection, ipcfd: ",
        "dome workerFunc : clientdn: '",
        "dome workerFunc : req:",
        "",
        "dome dome_put : Entering. lfn: '",
        "dome dome_put : Selected fs: '",
        "dome dome_putdone_disk :  server: '",
        "dome dome_putdone_disk :  Forwarding to headnode. server: '",
        "dome dome_putdone_head :  server: '",
        "dome dome_putdone_head :  Final size:   ",
        "domedome_putdone_head : ",
        "dome dome_chksumstatus : Checksum calculation failed. LFN: ",
        "dome ",
        "dome checkDiskSpaces : fs: ",
        "dome checkDiskSpaces : Number of local filesystems: ",
        "dome checkDiskSpaces : Enabling filesystem: ",
        "domecheckDiskSpaces : Server down or other trouble. Disabling filesystem: '",
        "dome DomeStatus : My automatically detected hostname is: ",
        "",
        "",
    ];

    /// Every lead, each with a byte changed, dropped or put in at every place, and every
    /// length of it, then text after it.
    fn lines() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for lead in LEADS {
            let lead = lead.as_bytes();
            for i in 0..=lead.len() {
                for c in [b' ', b'd', b'D', b'w', b'_', b':', 0xc3] {
                    let mut put = lead.to_vec();
                    put.insert(i, c);
                    out.push(put);
                    if i < lead.len() {
                        let mut changed = lead.to_vec();
                        changed[i] = c;
                        out.push(changed);
                    }
                }
                let mut dropped = lead.to_vec();
                if i < lead.len() {
                    dropped.remove(i);
                }
                out.push(dropped);
                out.push(lead[..i].to_vec());
            }
        }
        let tails: Vec<Vec<u8>> = out.iter().map(|l| [l.as_slice(), b"x 'y' : z"].concat()).collect();
        out.extend(tails);
        out
    }

    #[test]
    fn every_alternative_whose_lead_a_line_has_is_a_candidate_and_most_others_are_not() {
        let leads: Vec<&[u8]> = LEADS.iter().map(|l| l.as_bytes()).collect();
        let dispatch = LeadDispatch::of(&leads).expect("fewer than MAX");
        assert!(!dispatch.places.is_empty());
        let (mut kept, mut have) = (0, 0);
        for line in lines() {
            for at in [0, 3] {
                let text = [&b"{1}[1]"[..at], &line].concat();
                let mask = dispatch.candidates(&text, at);
                for (i, lead) in leads.iter().enumerate() {
                    if text[at..].starts_with(lead) {
                        assert!(mask & 1 << i != 0, "lead {i} {:?} on {:?}", LEADS[i], String::from_utf8_lossy(&text));
                        have += 1;
                    }
                }
                assert_eq!(mask >> LEADS.len(), 0);
                kept += mask.count_ones();
            }
        }
        // the dispatch narrows: on these lines, near as they are to the leads, not many
        // more candidates than alternatives that have their lead
        assert!(kept < have * 3, "{kept} candidates for {have} leads had");
    }

    #[test]
    fn no_lead_or_one_place_past_the_line_leaves_only_those_that_may_match() {
        let leads: [&[u8]; 3] = [b"ab", b"", b"ac"];
        let dispatch = LeadDispatch::of(&leads).unwrap();
        assert_eq!(dispatch.candidates(b"ab", 0), 0b011);
        assert_eq!(dispatch.candidates(b"xac", 1), 0b110);
        assert_eq!(dispatch.candidates(b"a", 0), 0b010);
        assert_eq!(dispatch.candidates(b"", 0), 0b010);
        assert_eq!(dispatch.candidates(b"zz", 0), 0b010);
    }

    #[test]
    fn more_alternatives_than_bits_are_not_dispatched() {
        let leads = vec![&b"a"[..]; MAX + 1];
        assert!(LeadDispatch::of(&leads).is_none());
        let all = LeadDispatch::of(&leads[..MAX]).unwrap();
        assert_eq!(all.candidates(b"a", 0), u64::MAX);
    }
}
