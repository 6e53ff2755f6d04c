//! The put table of the compiled DOME engine, `parsers/dome_puts.PutTable` rule for
//! rule: a head's `dome_put` (Entering, Selected fs, its thread's Exiting) joined with
//! the putdone lines of the disk and the head by PFN BASENAME.PUTCOUNT.EPOCH within the
//! window, PUTCOUNT told apart by the head process's count of `Selected fs` lines and its
//! calibrated offset; puts end at the settled disk Exiting, their timeout, the cap or
//! the end of input. Puts are named by their sequence number, as the Python snapshot
//! names them; open puts keep Python's OrderedDict order in an Lru, each put's Place in it.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::Hash;

use crate::dome_event::{DomeEvent, Val, CODE, FS, LFN, PFN, SERVER, SIZE};
use crate::dome_records::{PutRecord, Record};
use crate::dome_stats::DomeStats;
use crate::dome_clocks::{Clocks, HostId, NO_CLOCK};
use crate::hashing::{FxMap, FxSet};
use crate::lru::{Lru, Place};
// A put record ends, and is named, as a request record does (schema.rs, one declaration).
use crate::schema::{BY_EVICTION as EVICTED, BY_INPUT_END as INPUT_END, BY_LINE as LINE, BY_TIMEOUT as TIMEOUT};
use crate::schema::{FAILED, INCOMPLETE, SUCCESS};

const EPOCH_SLACK_S: i64 = 1;
/// A PUTCOUNT or EPOCH longer than this is no name the head gave (parsers/dome_puts.MAX_DIGITS).
const MAX_DIGITS: usize = 18;

/// (host, pid, TID): its host by number, so that a thread's key hashes and compares three
/// integers (an accept, call and Exiting line each looks its thread up twice).
pub type Thread = (HostId, i64, i64);
/// (host, pid) of a head process by its host's number: a putdone's join sets its head's
/// offset, where a key of the head's name was a copy of the name, hashed, and freed.
pub type Proc = (HostId, i64);
/// A joinable put's name, (server, BASENAME), in one text: BASENAME, then '/' and the server
/// when there is one. A basename has no '/', so the two read back apart (name_parts). One
/// text is looked up by &str from a buffer the table reuses (PutTable::name), where a key
/// of two Strings was two copies made, hashed and freed for each look-up (a Selected fs,
/// a putdone's join and its discard).
pub type NameKey = String;

/// `key` (empty first) made the name of (server, base), base a basename (no '/').
fn write_name(key: &mut String, server: Option<&str>, base: &str) {
    key.clear();
    key.push_str(base);
    if let Some(server) = server {
        key.push('/');
        key.push_str(server);
    }
}

/// The name of (server, base); None where base has a '/' (no basename: a bad snapshot).
pub fn name_key(server: Option<&str>, base: &str) -> Option<NameKey> {
    if base.as_bytes().contains(&b'/') {
        return None;
    }
    let mut key = String::new();
    write_name(&mut key, server, base);
    Some(key)
}

/// (server, base) of a name (the snapshot writes them apart).
pub fn name_parts(key: &str) -> (Option<&str>, &str) {
    match key.as_bytes().iter().position(|&b| b == b'/') {
        Some(at) => (Some(&key[at + 1..]), &key[..at]),
        None => (None, key),
    }
}

#[derive(Clone, Debug)]
pub struct OpenPut {
    pub seq: i64,
    pub head: String,
    /// head's number (not in its snapshot row, which names it)
    pub host: HostId,
    pub pid: i64,
    pub lfn: String,
    pub put_time: i64,
    pub latest: i64,
    pub put_code: Option<i64>,
    pub server: Option<String>,
    pub fs: Option<String>,
    pub sel_sec: Option<i64>,
    pub count: Option<i64>,
    pub pfn: Option<String>,
    pub size: Option<i64>,
    pub disk_time: Option<i64>,
    pub head_time: Option<i64>,
    pub disk_code: Option<i64>,
    pub head_code: Option<i64>,
    pub error: bool,
    pub whole: bool,
    pub threads: Vec<Thread>,
    // Not in its snapshot row: what the indices hold of it, for its entry (take_changes).
    pub deadline: i64,
    pub settled: Vec<i64>,
    pub thread: Option<Thread>,
}

/// What changed since the last take (dome_snapshot::take_changes), once tracked: puts by
/// seq (true: moved to the end of the activity order), and the index keys touched.
#[derive(Default)]
pub struct PutChanges {
    pub puts: FxMap<i64, bool>,
    pub unselected: FxSet<(String, i64, String)>,
    pub by_name: FxSet<NameKey>,
}

pub struct WaitItem {
    pub ev: DomeEvent,
    /// ev's host's number
    pub host: HostId,
    pub side: &'static str,
    pub waiting: bool,
}

/// The text after the last '/' (all of it without one). The separators here are found
/// byte by byte (an ASCII byte is never part of another character in UTF-8): str's rsplit
/// ran a char searcher, ~240 instructions each time, four times a putdone.
pub fn basename(path: &str) -> &str {
    match last_byte(path, b'/') {
        Some(at) => &path[at + 1..],
        None => path,
    }
}

fn last_byte(text: &str, byte: u8) -> Option<usize> {
    text.as_bytes().iter().rposition(|&b| b == byte)
}

fn decimal(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > MAX_DIGITS {
        return None;
    }
    // summed as the digits are checked (str::parse checked them again, ~140 instructions
    // a call, two a putdone); 18 digits never overflow an i64
    text.bytes().try_fold(0i64, |n, b| b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0')))
}

/// BASENAME, PUTCOUNT, EPOCH of a PFN named by the head; None for any other name.
pub fn split_pfn(pfn: &str) -> Option<(&str, i64, i64)> {
    let base = basename(pfn);
    let last = last_byte(base, b'.')?;
    let before = last_byte(&base[..last], b'.')?;
    let name = &base[..before];
    if name.is_empty() {
        return None;
    }
    Some((name, decimal(&base[before + 1..last])?, decimal(&base[last + 1..])?))
}

fn discard<K: Borrow<Q> + Hash + Eq, Q: Hash + Eq + ?Sized>(index: &mut FxMap<K, Vec<i64>>, key: &Q, seq: i64) {
    if let Some(same) = index.get_mut(key) {
        if let Some(at) = same.iter().position(|s| *s == seq) {
            same.remove(at);
            if same.is_empty() {
                index.remove(key);
            }
        }
    }
}

#[derive(Default)]
pub struct PutTable {
    pub max_open: usize,
    pub timeout_ms: i64,
    pub seq: i64,
    /// The open puts' seqs, least recently active first (a linked list: a put touched
    /// moves to the end in O(1), where an ordered tree of stamps cost ~470 instructions a move).
    pub order: Lru<i64>,
    pub open: FxMap<i64, (Place, OpenPut)>,
    pub deadlines: BinaryHeap<Reverse<(i64, i64)>>,
    pub settling: BinaryHeap<Reverse<(i64, i64)>>,
    pub put_threads: FxMap<Thread, i64>,
    pub done_threads: FxMap<Thread, (i64, &'static str)>,
    pub unselected: FxMap<(String, i64, String), Vec<i64>>,
    pub by_name: FxMap<NameKey, Vec<i64>>,
    pub by_pfn: FxMap<String, i64>,
    pub selected_count: FxMap<Proc, i64>,
    pub offset: FxMap<Proc, i64>,
    pub waiting: FxMap<NameKey, Vec<u64>>,
    pub waiting_order: VecDeque<(NameKey, u64)>,
    pub items: FxMap<u64, WaitItem>,
    pub next_item: u64,
    /// the hosts of dome_put lines, by number
    pub heads: FxSet<HostId>,
    pub changes: Option<PutChanges>,
    tick: u64,
    /// the name looked up last (write_name): a buffer kept, not a key made per look-up
    name: String,
}

fn text(ev: &DomeEvent, field: usize) -> Option<String> {
    ev.text(field).map(str::to_string)
}

impl PutTable {
    pub fn new(max_open: usize, timeout_ms: i64) -> Self {
        PutTable { max_open, timeout_ms, ..Default::default() }
    }

    fn stamp(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// `ev`'s thread, `host` the number of its host.
    fn thread_of(ev: &DomeEvent, host: HostId) -> Thread {
        (host, ev.pid, ev.tid)
    }

    fn changed(&mut self, seq: i64) {
        if let Some(c) = self.changes.as_mut() {
            c.puts.entry(seq).or_insert(false);
        }
    }

    fn moved(&mut self, seq: i64) {
        if let Some(c) = self.changes.as_mut() {
            c.puts.insert(seq, true);
        }
    }

    fn unselected_changed(&mut self, key: &(String, i64, String)) {
        if let Some(c) = self.changes.as_mut() {
            c.unselected.insert(key.clone());
        }
    }

    /// The name in `self.name` changed in by_name.
    fn by_name_changed(&mut self) {
        if let Some(c) = self.changes.as_mut() {
            if !c.by_name.contains(self.name.as_str()) {
                c.by_name.insert(self.name.clone());
            }
        }
    }

    /// `thread`'s dome_put call is `seq`'s (a put it named before changes too).
    fn put_thread(&mut self, thread: Thread, seq: i64) {
        if let Some(p) = self.get(seq) {
            p.thread = Some(thread);
        }
        if let Some(old) = self.put_threads.insert(thread, seq) {
            if old != seq {
                self.changed(old);
            }
        }
    }

    /// Put `put` last in activity order (a new put, or one touched).
    pub fn place(&mut self, put: OpenPut) {
        self.moved(put.seq);
        let tick = self.stamp();
        if let Some((old, _)) = self.open.get(&put.seq) {
            self.order.remove(old.h);
        }
        let place = Place { tick, h: self.order.push_back(put.seq) };
        self.open.insert(put.seq, (place, put));
    }

    fn move_to_end(&mut self, seq: i64) {
        self.moved(seq);
        let tick = self.stamp();
        if let Some((place, _)) = self.open.get_mut(&seq) {
            self.order.move_back(place.h);
            place.tick = tick;
        }
    }

    fn get(&mut self, seq: i64) -> Option<&mut OpenPut> {
        self.open.get_mut(&seq).map(|(_, p)| p)
    }

    pub fn in_order(&self) -> impl Iterator<Item = &OpenPut> {
        self.order.iter().map(move |s| &self.open[s].1)
    }

    // -- lines -------------------------------------------------------------------------
    pub fn entering(&mut self, ev: &DomeEvent, host: HostId, stats: &mut DomeStats, out: &mut Vec<Record>) {
        self.heads.insert(host);
        let lfn = text(ev, LFN).unwrap_or_default();
        let seq = self.new_put(ev, host, lfn.clone(), stats, out);
        if ev.tid >= 0 {
            let thread = Self::thread_of(ev, host);
            self.put_thread(thread, seq);
        } else {
            let key = (ev.host.clone(), ev.pid, lfn);
            self.unselected_changed(&key);
            self.unselected.entry(key).or_default().push(seq);
        }
    }

    pub fn selected(&mut self, ev: &DomeEvent, host: HostId, stats: &mut DomeStats, out: &mut Vec<Record>) {
        let proc = (host, ev.pid);
        let lfn = text(ev, LFN).unwrap_or_default();
        self.heads.insert(host);
        let count = self.selected_count.entry(proc).or_insert(0);
        *count += 1;
        let count = *count;
        let mut put = None;
        if ev.tid >= 0 {
            let thread = Self::thread_of(ev, host);
            put = self.put_threads.get(&thread).copied();
            if let Some(seq) = put {
                if let Some((_, p)) = self.open.get(&seq) {
                    if p.lfn != lfn || p.sel_sec.is_some() {
                        put = None;
                    }
                }
            }
        } else {
            let key = (ev.host.clone(), ev.pid, lfn.clone());
            if let Some(&last) = self.unselected.get(&key).and_then(|w| w.last()) {
                put = Some(last);
                discard(&mut self.unselected, &key, last);
                self.unselected_changed(&key);
            }
        }
        let seq = match put.filter(|s| self.open.contains_key(s)) {
            Some(seq) => seq,
            None => {
                let seq = self.new_put(ev, host, lfn.clone(), stats, out);
                if ev.tid >= 0 {
                    let thread = Self::thread_of(ev, host);
                    self.put_thread(thread, seq);
                }
                seq
            }
        };
        self.touch(seq, ev);
        let p = self.get(seq).unwrap();
        p.server = text(ev, SERVER);
        p.fs = text(ev, FS);
        p.sel_sec = Some(ev.ts.div_euclid(1000));
        p.count = Some(count);
        let p = &self.open[&seq].1;
        write_name(&mut self.name, p.server.as_deref(), basename(&p.lfn));
        self.by_name_changed();
        match self.by_name.get_mut(self.name.as_str()) {
            Some(seqs) => seqs.push(seq),
            None => {
                self.by_name.insert(self.name.clone(), vec![seq]);
            }
        }
        // taken before the loop: each putdone's join writes self.name again
        for id in self.waiting.remove(self.name.as_str()).unwrap_or_default() {
            let (wev, whost, side) = {
                let item = self.items.get_mut(&id).unwrap();
                item.waiting = false;
                (item.ev.clone(), item.host, item.side)
            };
            self.putdone(&wev, whost, side, stats);
        }
    }

    /// An `Exiting` line: the code of a put or putdone call on that thread, if any.
    pub fn returns(&mut self, ev: &DomeEvent, host: HostId, stats: &mut DomeStats, out: &mut Vec<Record>) {
        let thread = Self::thread_of(ev, host);
        self.returns_of(ev, &thread, stats, out);
    }

    fn returns_of(&mut self, ev: &DomeEvent, thread: &Thread, stats: &mut DomeStats, out: &mut Vec<Record>) {
        let code = Val::int(ev.field(CODE));
        if let Some(seq) = self.put_threads.remove(thread) {
            if self.open.contains_key(&seq) {
                self.touch(seq, ev);
                self.get(seq).unwrap().put_code = code;
                if code != Some(200) {
                    self.emit(seq, FAILED, LINE, ev.ts, stats, out);
                }
            }
        }
        if let Some((seq, side)) = self.done_threads.remove(thread) {
            self.changed(seq);
            let Some(p) = self.get(seq) else { return };
            if let Some(at) = p.threads.iter().position(|t| t == thread) {
                p.threads.remove(at);
            }
            if side == "disk" {
                p.disk_code = code;
                p.settled.push(ev.ts);
                self.settling.push(Reverse((ev.ts, seq)));
            } else {
                p.head_code = code;
            }
        }
    }

    pub fn process_started(&mut self, host: HostId, pid: i64) {
        let proc = (host, pid);
        self.selected_count.remove(&proc);
        self.offset.insert(proc, 0);
    }

    pub fn thread_reopened(&mut self, ev: &DomeEvent, host: HostId) {
        let thread = Self::thread_of(ev, host);
        if let Some(seq) = self.put_threads.remove(&thread) {
            self.changed(seq);
        }
        if let Some((seq, _)) = self.done_threads.remove(&thread) {
            self.changed(seq);
        }
    }

    pub fn putdone(&mut self, ev: &DomeEvent, host: HostId, side: &'static str, stats: &mut DomeStats) {
        let pfn = ev.text(PFN).unwrap_or("");
        let seq = match self.by_pfn.get(pfn) {
            Some(&seq) => seq,
            None => match self.join(ev, host, side, pfn, stats) {
                Some(seq) => seq,
                None => return,
            },
        };
        let p = self.get(seq).unwrap();
        let slot = if side == "disk" { &mut p.disk_time } else { &mut p.head_time };
        if slot.is_some() {
            stats.repeated_putdones += 1;
            return;
        }
        *slot = Some(ev.ts);
        p.size = Val::int(ev.field(SIZE));
        p.whole = p.whole || ev.whole_seconds;
        if ev.tid >= 0 {
            let thread = Self::thread_of(ev, host);
            let p = self.get(seq).unwrap();
            p.threads.push(thread);
            if let Some((old, _)) = self.done_threads.insert(thread, (seq, side)) {
                if old != seq {
                    self.changed(old);
                }
            }
        }
        self.move_to_end(seq);
    }

    pub fn putdone_error(&mut self, ev: &DomeEvent, stats: &mut DomeStats) {
        match ev.text(PFN).and_then(|pfn| self.by_pfn.get(pfn)).copied() {
            None => stats.orphan_putdone_errors += 1,
            Some(seq) => {
                self.changed(seq);
                self.get(seq).unwrap().error = true
            }
        }
    }

    fn join(&mut self, ev: &DomeEvent, host: HostId, side: &'static str, pfn: &str, stats: &mut DomeStats) -> Option<i64> {
        let Some((base, putcount, epoch)) = split_pfn(pfn) else {
            stats.unusable_lines += 1;
            return None;
        };
        write_name(&mut self.name, ev.text(SERVER), base);
        let candidate = |s: &i64| {
            let p = &self.open[s].1;
            let fs = p.fs.as_deref().unwrap_or("");
            let under = pfn.len() > fs.len() && pfn.starts_with(fs) && pfn.as_bytes()[fs.len()] == b'/';
            let gap = epoch - p.sel_sec.unwrap_or(i64::MIN / 2);
            under && (0..=EPOCH_SLACK_S).contains(&gap) && ev.ts - p.put_time <= self.timeout_ms
        };
        // The first candidate and whether there is another: most putdones have one, which
        // needs no list made (an allocation and its free a putdone).
        let seqs = self.by_name.get(self.name.as_str()).map_or(&[][..], Vec::as_slice);
        let mut found = seqs.iter().filter(|s| candidate(s));
        let first = found.next().copied();
        let several = found.next().is_some();
        let Some(first) = first else {
            let key = self.name.clone();
            let id = self.next_item;
            self.next_item += 1;
            self.items.insert(id, WaitItem { ev: ev.clone(), host, side, waiting: true });
            self.waiting.entry(key.clone()).or_default().push(id);
            self.waiting_order.push_back((key, id));
            return None;
        };
        let seq = if !several {
            let p = &self.open[&first].1;
            let proc = (p.host, p.pid);
            let off = putcount - p.count.unwrap_or(0);
            self.offset.insert(proc, off);
            first
        } else {
            let candidates: Vec<i64> = seqs.iter().copied().filter(candidate).collect();
            let named: Vec<i64> = candidates
                .iter()
                .copied()
                .filter(|s| {
                    let p = &self.open[s].1;
                    self.offset.get(&(p.host, p.pid)).is_some_and(|o| p.count.unwrap_or(0) + o == putcount)
                })
                .collect();
            if named.len() == 1 {
                stats.putcount_joins += 1;
                named[0]
            } else {
                stats.ambiguous_putdones += 1;
                candidates[0]
            }
        };
        discard(&mut self.by_name, self.name.as_str(), seq);
        self.by_name_changed();
        self.changed(seq);
        self.get(seq).unwrap().pfn = Some(pfn.to_string());
        self.by_pfn.insert(pfn.to_string(), seq);
        Some(seq)
    }

    // -- time ---------------------------------------------------------------------------
    /// The waits, settled puts and deadlines past by their heads' clocks. `bound`: at
    /// least every clock of `clocks`, so that where even it is not past, no clock is looked
    /// up (a put's deadline and most waits are not past on most lines).
    pub fn expire(&mut self, clocks: &Clocks<HostId>, bound: i64, allowance_ms: i64,
                  stats: &mut DomeStats, out: &mut Vec<Record>) {
        let not_past = |ms: i64| bound - allowance_ms <= ms;
        let front_waits = self.waiting_order.front().is_some_and(|(_, id)| {
            let item = &self.items[id];
            item.waiting && item.ev.ts >= bound - allowance_ms
        });
        if !self.waiting_order.is_empty() && !front_waits {
            let latest = if self.heads.is_empty() {
                clocks.values().max()
            } else {
                self.heads.iter().filter_map(|h| clocks.get(h)).max()
            };
            let now = latest.unwrap_or(NO_CLOCK) - allowance_ms;
            while let Some(&(_, id)) = self.waiting_order.front() {
                let item = &self.items[&id];
                if item.waiting && item.ev.ts >= now {
                    break;
                }
                let (key, _) = self.waiting_order.pop_front().unwrap();
                let item = self.items.remove(&id).unwrap();
                if item.waiting {
                    self.orphan(&key, id, stats);
                }
            }
        }
        // A first entry not past even by the bound (most lines) ends each walk with no put
        // looked up: the entries after it are no earlier, so none of them is past either
        // (one whose put is gone waits there to be dropped when the bound passes it).
        while let Some(&Reverse((returned, seq))) = self.settling.peek() {
            if not_past(returned) {
                break;
            }
            if let Some((_, p)) = self.open.get(&seq) {
                if clocks.get(&p.host).unwrap_or(NO_CLOCK) - allowance_ms <= returned {
                    break;
                }
            }
            self.settling.pop();
            if self.open.contains_key(&seq) {
                self.end_joined(seq, LINE, stats, out);
            }
        }
        while let Some(&Reverse((deadline, seq))) = self.deadlines.peek() {
            if not_past(deadline) {
                return;
            }
            let Some((_, p)) = self.open.get(&seq) else {
                self.deadlines.pop();
                continue;
            };
            if clocks.get(&p.host).unwrap_or(NO_CLOCK) - allowance_ms <= deadline {
                return;
            }
            self.deadlines.pop();
            stats.expired_puts += 1;
            self.end_unfinished(seq, TIMEOUT, stats, out);
        }
    }

    pub fn finish(&mut self, clocks: &Clocks<HostId>, stats: &mut DomeStats, out: &mut Vec<Record>) {
        let order: Vec<(NameKey, u64)> = self.waiting_order.drain(..).collect();
        for (key, id) in order {
            if self.items.get(&id).is_some_and(|i| i.waiting) {
                self.orphan(&key, id, stats);
            }
        }
        self.items.clear();
        let mut deadlines: Vec<(i64, i64)> = self.deadlines.drain().map(|Reverse(d)| d).collect();
        deadlines.sort();
        for (deadline, seq) in deadlines {
            let Some((_, p)) = self.open.get(&seq) else { continue };
            let reason = if deadline <= clocks.get(&p.host).unwrap_or(NO_CLOCK) { TIMEOUT } else { INPUT_END };
            self.end_unfinished(seq, reason, stats, out);
        }
        self.settling.clear();
    }

    fn orphan(&mut self, key: &str, id: u64, stats: &mut DomeStats) {
        if let Some(item) = self.items.get_mut(&id) {
            item.waiting = false;
        }
        if let Some(same) = self.waiting.get_mut(key) {
            if let Some(at) = same.iter().position(|i| *i == id) {
                same.remove(at);
                if same.is_empty() {
                    self.waiting.remove(key);
                }
            }
        }
        stats.orphan_putdones += 1;
    }

    // -- records -----------------------------------------------------------------------
    fn new_put(&mut self, ev: &DomeEvent, host: HostId, lfn: String, stats: &mut DomeStats, out: &mut Vec<Record>) -> i64 {
        if self.open.len() >= self.max_open {
            if let Some((_, &front)) = self.order.first_key_value() {
                stats.put_evictions += 1;
                self.end_unfinished(front, EVICTED, stats, out);
            }
        }
        self.seq += 1;
        let put = OpenPut {
            seq: self.seq, head: ev.host.clone(), host, pid: ev.pid, lfn, put_time: ev.ts, latest: ev.ts,
            put_code: None, server: None, fs: None, sel_sec: None, count: None, pfn: None, size: None,
            disk_time: None, head_time: None, disk_code: None, head_code: None, error: false,
            whole: ev.whole_seconds, threads: Vec::new(), deadline: ev.ts + self.timeout_ms, settled: Vec::new(),
            thread: None,
        };
        self.deadlines.push(Reverse((put.deadline, put.seq)));
        let seq = put.seq;
        self.place(put);
        seq
    }

    fn touch(&mut self, seq: i64, ev: &DomeEvent) {
        if let Some(p) = self.get(seq) {
            p.latest = p.latest.max(ev.ts);
            p.whole = p.whole || ev.whole_seconds;
        }
        self.move_to_end(seq);
    }

    fn end_unfinished(&mut self, seq: i64, reason: &'static str, stats: &mut DomeStats, out: &mut Vec<Record>) {
        let p = &self.open[&seq].1;
        if p.disk_time.is_some() || p.head_time.is_some() {
            self.end_joined(seq, LINE, stats, out);
        } else {
            let latest = p.latest;
            self.emit(seq, INCOMPLETE, reason, latest, stats, out);
        }
    }

    fn end_joined(&mut self, seq: i64, reason: &'static str, stats: &mut DomeStats, out: &mut Vec<Record>) {
        let p = &self.open[&seq].1;
        let failed = p.error || [p.head_code, p.disk_code].iter().flatten().any(|c| *c != 200);
        let ended = p.head_time.or(p.disk_time).unwrap_or(p.latest);
        self.emit(seq, if failed { FAILED } else { SUCCESS }, reason, ended, stats, out);
    }

    fn emit(&mut self, seq: i64, status: &'static str, reason: &'static str, ended: i64, stats: &mut DomeStats,
            out: &mut Vec<Record>) {
        let Some((place, put)) = self.open.remove(&seq) else { return };
        self.changed(seq);
        self.order.remove(place.h);
        if let Some(pfn) = &put.pfn {
            self.by_pfn.remove(pfn);
        } else if put.sel_sec.is_some() {
            write_name(&mut self.name, put.server.as_deref(), basename(&put.lfn));
            discard(&mut self.by_name, self.name.as_str(), seq);
            self.by_name_changed();
        } else {
            let key = (put.head.clone(), put.pid, put.lfn.clone());
            discard(&mut self.unselected, &key, seq);
            self.unselected_changed(&key);
        }
        for thread in &put.threads {
            if let Some((other, _)) = self.done_threads.remove(thread) {
                if other != seq {
                    self.changed(other);
                }
            }
        }
        let joined = put.pfn.is_some();
        let with_pfn = status != INCOMPLETE && joined;
        let code = put.head_code.or(put.disk_code);
        stats.puts += 1;
        if joined && (put.disk_time.is_some() || put.head_time.is_some()) {
            stats.puts_joined += 1;
        }
        out.push(Record::Put(PutRecord {
            head: put.head,
            lfn: Some(put.lfn),
            put_time: put.put_time,
            put_code: put.put_code,
            server: put.server,
            fs: put.fs,
            pfn: if with_pfn { put.pfn } else { None },
            size: if with_pfn { put.size } else { None },
            putdone_code: if with_pfn { code } else { None },
            putdone_disk_time: if joined { put.disk_time } else { None },
            putdone_head_time: if joined { put.head_time } else { None },
            put_to_putdone: if joined { Some((ended - put.put_time).max(0)) } else { None },
            status,
            end_reason: reason,
            ended,
            whole_seconds: put.whole,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::{basename, name_key, name_parts, split_pfn};

    #[test]
    fn a_name_reads_back_as_its_server_and_basename_and_no_two_names_share_a_key() {
        let names = [(None, "f.root"), (Some(""), "f.root"), (Some("disk01"), "f.root"), (Some("disk01"), ""),
                     (None, ""), (Some("a/b"), "f"), (Some("a"), "b/f"), (Some("é/"), "é")];
        let mut keys = Vec::new();
        for (server, base) in names {
            let Some(key) = name_key(server, base) else {
                // a text with a '/' is no basename (a snapshot's bad row), refused
                assert!(base.contains('/'), "{base}");
                continue;
            };
            assert_eq!(name_parts(&key), (server, base));
            keys.push(key);
        }
        let count = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!((count, keys.len()), (7, 7));
    }

    #[test]
    fn a_pfn_splits_at_its_last_two_dots_after_its_last_slash() {
        assert_eq!(basename("/srv/dpm/01/cms/f.root.7.1496133840"), "f.root.7.1496133840");
        assert_eq!(basename("no-slash"), "no-slash");
        assert_eq!(basename("/ends/with/"), "");
        assert_eq!(split_pfn("/srv/dpm/01/cms/f.root.7.1496133840"), Some(("f.root", 7, 1496133840)));
        assert_eq!(split_pfn("d.o.t/é.1.2"), Some(("é", 1, 2)));
        // up to MAX_DIGITS digits, leading zeros read as Python's int() reads them
        assert_eq!(split_pfn("/s/f.999999999999999999.007"), Some(("f", 999_999_999_999_999_999, 7)));
        assert_eq!(split_pfn("/s/f.1.1234567890123456789"), None);
        assert_eq!(split_pfn("/s/f.+1.2"), None);
        // no name, too few dots, a count that is no decimal, a dot only before the slash
        for bad in ["/srv/.7.1", "/srv/f.7", "/srv/f", "/srv/f.x.1", "/srv/f.1.", "a.b/c.1", "f.1.2²"] {
            assert_eq!(split_pfn(bad), None, "{bad}");
        }
    }
}
