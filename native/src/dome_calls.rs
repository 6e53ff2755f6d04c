//! The call table of the compiled DOME engine, `parsers/dome_calls.CallTable` rule for
//! rule: one call per (host, pid, TID), opened by `accept` (or `call` with no accept
//! line), ended by `returns`, cut by a new open line, its process's death, silence past
//! the timeout, the cap, or the end of input. Per host the open calls keep Python's
//! OrderedDict order (least recently active first) in an Lru, each call's Place in it.

use crate::dome_clocks::{HostId, Ordered};
use crate::dome_event::{DomeEvent, Role, Val, CLIENT_HOST, CODE, OP, QUERY, REMOTE_HOST};
use crate::dome_records::{CallRecord, Record, Text};
use crate::dome_stats::DomeStats;
use crate::hashing::{FxMap, FxSet};
use crate::lru::{Lru, Place};
use crate::text_cache::TextCache;

pub type ThreadKey = (i64, i64);
/// host -> its role (DomeState's).
pub type Roles = Ordered<HostId, String>;

#[derive(Clone, Debug)]
pub struct OpenCall {
    pub start: i64,
    pub latest: i64,
    pub framed: bool,
    pub command: Option<Text>,
    pub role: Option<Text>,
    pub caller: Option<Text>,
    pub remote: Option<Text>,
    pub whole: bool,
}

/// One host's open calls in activity order (a linked list: a line moves its call to the
/// end in O(1), where an ordered tree of stamps searched and rebalanced twice a line).
pub struct HostCalls {
    /// The host's name, as its calls' records hold it.
    pub name: Text,
    /// Each call's key and its `latest`, a copy kept equal to the call's: every line's
    /// sweep reads the least recent call's, which the table's look-up cost ~50
    /// instructions a DOME line (issue 30).
    pub order: Lru<(ThreadKey, i64)>,
    pub calls: FxMap<ThreadKey, (Place, OpenCall)>,
}

impl HostCalls {
    fn new(name: Text) -> Self {
        HostCalls { name, order: Lru::default(), calls: FxMap::default() }
    }
    pub fn front(&self) -> Option<(ThreadKey, &OpenCall)> {
        self.order.first_key_value().map(|(_, (k, _))| (*k, &self.calls[k].1))
    }
    /// The least recent call's key and latest stamp, without its look-up.
    fn front_latest(&self) -> Option<(ThreadKey, i64)> {
        self.order.first_key_value().map(|(_, &(k, latest))| (k, latest))
    }
    pub fn in_order(&self) -> impl Iterator<Item = (ThreadKey, &OpenCall)> {
        self.order.iter().map(move |(k, _)| (*k, &self.calls[k].1))
    }
    fn remove(&mut self, key: &ThreadKey) -> Option<OpenCall> {
        let (place, call) = self.calls.remove(key)?;
        self.order.remove(place.h);
        Some(call)
    }
}

pub fn role_of_query(query: Option<&str>) -> Option<&'static str> {
    let q = query?;
    if q.starts_with("/domehead/") {
        Some("head")
    } else if q.starts_with("/domedisk/") {
        Some("disk")
    } else {
        None
    }
}

pub struct CallTable {
    pub max_open: usize,
    /// Per host, in the order the hosts came (Python's dict): a line looks its host up
    /// twice or more, most often the host of the line before (Ordered's cheap case).
    pub open: Ordered<HostId, HostCalls>,
    pub count: usize,
    tick: u64,
    /// The calls opened, moved or closed since the last take (dome_snapshot::take_changes),
    /// once tracked: every change of an open call moves it to the end.
    pub changed: Option<FxSet<(HostId, ThreadKey)>>,
    /// The texts of the calls and their records, each made once while it is asked for
    /// again (a few hosts, roles, commands and clients), not a String per call and record.
    texts: TextCache,
}

impl CallTable {
    pub fn new(max_open: usize) -> Self {
        CallTable { max_open, open: Ordered::default(), count: 0, tick: 0, changed: None, texts: TextCache::default() }
    }

    fn stamp(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn mark(&mut self, host: HostId, key: ThreadKey) {
        if let Some(changed) = self.changed.as_mut() {
            changed.insert((host, key));
        }
    }

    /// A line of a thread (tid >= 0): open, fill, end or touch its call.
    pub fn line(&mut self, ev: &DomeEvent, host_id: HostId, roles: &Roles, stats: &mut DomeStats,
                out: &mut Vec<Record>) {
        let key = (ev.pid, ev.tid);
        let role = ev.role;
        // the host's row, found once for the line (an eviction removes calls, never a row)
        let texts = &mut self.texts;
        let row = self.open.row_or_insert_with(&host_id, || HostCalls::new(texts.get(&ev.host)));
        let framed = self.open.rows[row].1.calls.get(&key).map(|(_, c)| c.framed);
        let mut has_call = framed.is_some();
        if role == Role::Accept || (role == Role::Call && framed == Some(true)) {
            if has_call {
                let call = self.open.rows[row].1.remove(&key).unwrap();
                self.close(host_id, key, call, None, roles, stats, out);
            }
            self.open_call(ev, host_id, roles, stats, out);
            has_call = true;
        } else if role == Role::Call && !has_call {
            self.open_call(ev, host_id, roles, stats, out);
            has_call = true;
        }
        if !has_call {
            if role == Role::Returns {
                stats.stray_call_ends += 1;
            } else if role == Role::Command {
                stats.commands_without_call += 1;
            }
            return;
        }
        self.mark(host_id, key);
        let host = &mut self.open.rows[row].1;
        let (place, call) = host.calls.get_mut(&key).unwrap();
        // A call that holds the latest tick of all is at its host's end already (most
        // lines are of the thread the line before was): nothing to move.
        if place.tick != self.tick {
            self.tick += 1;
            host.order.move_back(place.h);
            place.tick = self.tick;
        }
        call.latest = call.latest.max(ev.ts);
        if let Some((_, latest)) = host.order.get_mut(place.h) {
            *latest = call.latest;
        }
        call.whole = call.whole || ev.whole_seconds;
        match role {
            Role::Call => {
                call.framed = true;
                call.caller = ev.text(CLIENT_HOST).map(|t| self.texts.get(t));
                call.remote = ev.text(REMOTE_HOST).map(|t| self.texts.get(t));
            }
            Role::Command => {
                call.framed = true;
                call.command = ev.text(OP).map(|t| self.texts.get(t));
                call.role = role_of_query(ev.text(QUERY)).map(|t| self.texts.get(t));
            }
            Role::Returns => {
                let call = host.remove(&key).unwrap();
                self.close(host_id, key, call, Some(ev), roles, stats, out);
            }
            _ => {}
        }
    }

    fn open_call(&mut self, ev: &DomeEvent, host: HostId, roles: &Roles, stats: &mut DomeStats,
                 out: &mut Vec<Record>) {
        if self.count >= self.max_open {
            self.evict(roles, stats, out);
        }
        let call = OpenCall {
            start: ev.ts, latest: ev.ts, framed: false, command: None, role: None, caller: None, remote: None,
            whole: ev.whole_seconds,
        };
        self.insert(host, &ev.host, (ev.pid, ev.tid), call);
    }

    /// A call of host `host`, named `name`, open.
    pub fn insert(&mut self, host: HostId, name: &str, key: ThreadKey, call: OpenCall) {
        let tick = self.stamp();
        self.mark(host, key);
        let texts = &mut self.texts;
        let h = self.open.get_or_insert_with(&host, || HostCalls::new(texts.get(name)));
        let place = Place { tick, h: h.order.push_back((key, call.latest)) };
        if let Some((old, _)) = h.calls.insert(key, (place, call)) {
            h.order.remove(old.h);
        }
        self.count += 1;
    }

    #[allow(clippy::too_many_arguments)]
    fn close(&mut self, host: HostId, key: ThreadKey, call: OpenCall, ret: Option<&DomeEvent>,
             roles: &Roles, stats: &mut DomeStats, out: &mut Vec<Record>) {
        self.count -= 1;
        self.mark(host, key);
        stats.calls += 1;
        if ret.is_none() {
            stats.cut_calls += 1;
        }
        let end = ret.map(|r| r.ts);
        out.push(Record::Call(CallRecord {
            host: self.open.get_ref(&host).expect("a closed call's host has a row").name.clone(),
            pid: key.0,
            tid: key.1,
            role: call.role.or_else(|| roles.get_ref(&host).map(|r| self.texts.get(r))),
            command: call.command,
            http_code: ret.and_then(|r| Val::int(r.field(CODE))),
            caller: call.caller,
            remote_client: call.remote,
            start: call.start,
            end,
            duration: end.map(|e| (e - call.start).max(0)),
            cut: ret.is_none(),
            whole_seconds: call.whole,
        }));
    }

    /// A process of the host died: cut every call open on the host's other pids
    /// (keep_pid None: every pid, a pid reused by a new process).
    pub fn end_process(&mut self, host: HostId, keep_pid: Option<i64>, roles: &Roles,
                       stats: &mut DomeStats, out: &mut Vec<Record>) {
        let Some(h) = self.open.get_ref(&host) else { return };
        let keys: Vec<ThreadKey> = h.in_order().map(|(k, _)| k).filter(|k| Some(k.0) != keep_pid).collect();
        for key in keys {
            let call = self.open.get_mut(&host).unwrap().remove(&key).unwrap();
            self.close(host, key, call, None, roles, stats, out);
        }
    }

    /// Cut the calls of the host silent since before horizon.
    pub fn expire(&mut self, host: HostId, horizon: i64, roles: &Roles, stats: &mut DomeStats,
                  out: &mut Vec<Record>) {
        loop {
            let Some(h) = self.open.get_ref(&host) else { return };
            let Some((key, latest)) = h.front_latest() else { return };
            if latest >= horizon {
                return;
            }
            stats.expired_calls += 1;
            let call = self.open.get_mut(&host).unwrap().remove(&key).unwrap();
            self.close(host, key, call, None, roles, stats, out);
        }
    }

    /// The cap: cut the least recently active call of any host (ties: the host's name).
    fn evict(&mut self, roles: &Roles, stats: &mut DomeStats, out: &mut Vec<Record>) {
        let mut best: Option<(i64, &Text, HostId)> = None;
        for (host, h) in self.open.iter() {
            if let Some((_, c)) = h.front() {
                if best.is_none_or(|(latest, bn, _)| (c.latest, &h.name) < (latest, bn)) {
                    best = Some((c.latest, &h.name, *host));
                }
            }
        }
        let Some((_, _, host)) = best else { return };
        let h = self.open.get_mut(&host).unwrap();
        let (key, _) = h.front().unwrap();
        let call = h.remove(&key).unwrap();
        stats.call_evictions += 1;
        self.close(host, key, call, None, roles, stats, out);
    }

    /// The end of input cuts every open call, oldest start first.
    pub fn finish(&mut self, roles: &Roles, stats: &mut DomeStats, out: &mut Vec<Record>) {
        // (start, name, key) the order; a name is its host's alone, so the number after it
        // orders nothing
        let mut left: Vec<(i64, Text, ThreadKey, HostId)> = self
            .open
            .iter()
            .flat_map(|(host, h)| h.in_order().map(move |(k, c)| (c.start, h.name.clone(), k, *host)))
            .collect();
        left.sort();
        for (_, _, key, host) in left {
            let call = self.open.get_mut(&host).unwrap().remove(&key).unwrap();
            self.close(host, key, call, None, roles, stats, out);
        }
    }
}
