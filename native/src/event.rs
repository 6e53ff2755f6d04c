//! One parsed DPM line as the engine takes it (`Ev`, borrowing the line's text; `OwnedEv`
//! for a line that must wait), its role, and the digest that recognises a line read twice.

use std::hash::{Hash, Hasher};

use crate::hashing::Fx;
use crate::names::Sym;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Role {
    Accept,
    ConnFailure,
    Call,
    Token,
    SlowStart,
    Status,
    Returns,
    Startup,
    File,
    Detail,
    Other,
}

impl Role {
    pub fn from_name(name: &str) -> Option<Role> {
        Some(match name {
            "accept" => Role::Accept,
            "conn_failure" => Role::ConnFailure,
            "call" => Role::Call,
            "token" => Role::Token,
            "slow_start" => Role::SlowStart,
            "status" => Role::Status,
            "returns" => Role::Returns,
            "startup" => Role::Startup,
            "file" => Role::File,
            "detail" => Role::Detail,
            "other" => Role::Other,
            _ => return None,
        })
    }
}

/// One parsed line, borrowing its text (OwnedEv keeps one that must wait).
pub struct Ev<'a> {
    pub ts: i64,
    pub host: Sym,
    pub daemon: Sym,
    pub pid: i64,
    pub tid: i64,
    pub func: Sym,
    pub role: Role,
    pub op: Option<Sym>,
    pub client: Option<&'a str>,
    pub token: Option<&'a str>,
    pub nfiles: Option<i64>,
    pub state: Option<Sym>,
    pub rc: Option<i64>,
    pub surl: Option<&'a str>,
    pub path: Option<&'a str>,
}

pub(crate) struct OwnedEv {
    pub(crate) ts: i64,
    host: Sym,
    daemon: Sym,
    pid: i64,
    tid: i64,
    func: Sym,
    role: Role,
    op: Option<Sym>,
    client: Option<Box<str>>,
    token: Option<Box<str>>,
    nfiles: Option<i64>,
    state: Option<Sym>,
    rc: Option<i64>,
    surl: Option<Box<str>>,
    path: Option<Box<str>>,
}

impl Ev<'_> {
    pub(crate) fn owned(&self) -> OwnedEv {
        OwnedEv {
            ts: self.ts,
            host: self.host,
            daemon: self.daemon,
            pid: self.pid,
            tid: self.tid,
            func: self.func,
            role: self.role,
            op: self.op,
            client: self.client.map(Into::into),
            token: self.token.map(Into::into),
            nfiles: self.nfiles,
            state: self.state,
            rc: self.rc,
            surl: self.surl.map(Into::into),
            path: self.path.map(Into::into),
        }
    }

    /// What recognises a line read twice (Python: hash of the whole Event).
    pub(crate) fn digest(&self) -> u64 {
        let mut h = Fx::default();
        (self.ts, self.host, self.daemon, self.pid, self.tid, self.func, self.role).hash(&mut h);
        (self.op, self.client, self.token, self.nfiles, self.state, self.rc, self.surl, self.path).hash(&mut h);
        // splitmix64's finalizer: every input bit reaches every output bit
        let mut z = h.finish();
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl OwnedEv {
    pub(crate) fn view(&self) -> Ev<'_> {
        Ev {
            ts: self.ts,
            host: self.host,
            daemon: self.daemon,
            pid: self.pid,
            tid: self.tid,
            func: self.func,
            role: self.role,
            op: self.op,
            client: self.client.as_deref(),
            token: self.token.as_deref(),
            nfiles: self.nfiles,
            state: self.state,
            rc: self.rc,
            surl: self.surl.as_deref(),
            path: self.path.as_deref(),
        }
    }
}

