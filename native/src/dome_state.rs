//! The DOME reassembly's state and rules, `parsers/dome_reassembly.DomeReassembler` rule for
//! rule: the per-host clocks and watermarks, the host's role, process lives, the handlers
//! of each role, capacity and filesystem events, over the call table (dome_calls) and the
//! put table (dome_puts). No Python here: dome_engine.rs is its binding, dome_snapshot.rs
//! its state codec.

use crate::byte_runs::equal;
use crate::dome_calls::{role_of_query, CallTable};
use crate::dome_clocks::{advance_clocks, Clocks, HostId, HostIds, Ordered, NO_CLOCK};
use crate::dome_event::{DomeEvent, Role, Val, COUNT, FS, PHYS, FREE, QUERY, SERVER};
use crate::dome_puts::PutTable;
use crate::dome_records::Record;
use crate::dome_stats::DomeStats;

pub struct DomeState {
    pub timeout_ms: i64,
    pub allowance_ms: i64,
    pub stats: DomeStats,
    /// The hosts' numbers, which every table below keys a host by (the snapshot writes
    /// the names).
    pub hosts: HostIds,
    pub clocks: Clocks<HostId>,
    /// At least every host's clock (NO_CLOCK: none yet): where even it says no put is
    /// due, the put table's sweep looks no head's clock up (most lines).
    pub clock_bound: i64,
    /// host -> its role, in the order the hosts were first given one (Python's dict).
    pub roles: Ordered<HostId, String>,
    pub pids: Ordered<(HostId, String), i64>,
    pub fs_enabled: Ordered<(Option<String>, Option<String>), bool>,
    pub calls: CallTable,
    pub puts: PutTable,
}

impl DomeState {
    pub fn new(timeout_ms: i64, max_calls: usize, max_puts: usize, allowance_ms: i64) -> Self {
        DomeState {
            timeout_ms,
            allowance_ms,
            stats: DomeStats::default(),
            hosts: HostIds::default(),
            clocks: Ordered::default(),
            clock_bound: NO_CLOCK,
            roles: Ordered::default(),
            pids: Ordered::default(),
            fs_enabled: Ordered::default(),
            calls: CallTable::new(max_calls),
            puts: PutTable::new(max_puts, timeout_ms),
        }
    }

    pub fn set_role(&mut self, host: HostId, role: &str) {
        let known = self.roles.get_or_insert_with(&host, String::new);
        // most lines say again what the host's role is: nothing to copy then
        if !equal(known.as_bytes(), role.as_bytes()) {
            known.clear();
            known.push_str(role);
        }
    }

    pub fn feed(&mut self, ev: &DomeEvent, out: &mut Vec<Record>) {
        let host = self.hosts.id(&ev.host);
        self.feed_host(host, ev, out);
    }

    /// feed() of an event whose host's number the caller knows (`self.hosts.id(&ev.host)`).
    pub fn feed_host(&mut self, host: HostId, ev: &DomeEvent, out: &mut Vec<Record>) {
        self.stats.lines += 1;
        // The host's clock, found once for the line: its sweep at the end reads it (no
        // rule before then moves a clock).
        let clock = self.clocks.get_or_insert_with(&host, || ev.ts);
        *clock = (*clock).max(ev.ts);
        let clock = *clock;
        self.clock_bound = self.clock_bound.max(clock);
        if ev.role == Role::JournaldSuppressed {
            // journald's notice: no process's line, a record of the gap.
            let lines = Val::int(ev.field(COUNT)).unwrap_or(0);
            self.stats.journald_suppressed_lines += lines;
            out.push(Record::JournaldGap { time: ev.ts, host: ev.host.clone(), program: ev.program.clone(), lines });
            self.sweep_at(host, clock, out);
            return;
        }
        self.learn_role(ev, host);
        self.process_life(ev, host, out);
        if matches!(ev.role, Role::Accept | Role::Call) && ev.tid >= 0 {
            self.puts.thread_reopened(ev, host);
        }
        let st = &mut self.stats;
        match ev.role {
            Role::Put => self.puts.entering(ev, host, st, out),
            Role::PutSelected => self.puts.selected(ev, host, st, out),
            Role::Returns if ev.tid >= 0 => self.puts.returns(ev, host, st, out),
            Role::PutdoneDisk => self.puts.putdone(ev, host, "disk", st),
            Role::PutdoneHead => self.puts.putdone(ev, host, "head", st),
            Role::PutdoneError => self.puts.putdone_error(ev, st),
            Role::Capacity => {
                st.capacity += 1;
                out.push(Record::Capacity {
                    time: ev.ts, host: ev.host.clone(), fs: ev.field(FS).clone(),
                    phys: ev.field(PHYS).clone(), free: ev.field(FREE).clone(),
                });
            }
            Role::FsEnabled | Role::FsDisabled => {
                let key = (ev.text(SERVER).map(str::to_string), ev.text(FS).map(str::to_string));
                let enabled = ev.role == Role::FsEnabled;
                st.fs_events += 1;
                out.push(Record::FsEvent {
                    time: ev.ts, host: ev.host.clone(), server: ev.field(SERVER).clone(), fs: ev.field(FS).clone(),
                    enabled, transition: self.fs_enabled.get(&key).unwrap_or(true) != enabled,
                });
                self.fs_enabled.set(key, enabled);
            }
            _ => {}
        }
        if ev.tid >= 0 {
            self.calls.line(ev, host, &self.roles, &mut self.stats, out);
        } else if ev.role.frames() {
            self.stats.unframed_lines += 1;
        }
        self.sweep_at(host, clock, out);
    }

    pub fn advance(&mut self, now_ms: i64, out: &mut Vec<Record>) {
        // before the first host's clock is raised to now_ms: its sweep reads the bound
        self.clock_bound = self.clock_bound.max(now_ms);
        advance_clocks(self, |st| &mut st.clocks, now_ms, |st, host| st.sweep(*host, out));
    }

    pub fn finish(&mut self, out: &mut Vec<Record>) {
        self.calls.finish(&self.roles, &mut self.stats, out);
        self.puts.finish(&self.clocks, &mut self.stats, out);
    }

    fn learn_role(&mut self, ev: &DomeEvent, host: HostId) {
        let role = if ev.role == Role::Command {
            role_of_query(ev.text(QUERY))
        } else if ev.role.says_head() {
            Some("head")
        } else if ev.role.says_disk() {
            Some("disk")
        } else {
            None
        };
        if let Some(role) = role {
            self.set_role(host, role);
        }
    }

    fn process_life(&mut self, ev: &DomeEvent, host: HostId, out: &mut Vec<Record>) {
        let before = self.pids.replace_with(
            |(h, program)| *h == host && equal(program.as_bytes(), ev.program.as_bytes()),
            || (host, ev.program.clone()),
            ev.pid,
        );
        if ev.role == Role::Startup {
            if before.is_some() {
                self.stats.process_deaths += 1;
            }
            self.calls.end_process(host, None, &self.roles, &mut self.stats, out);
            self.puts.process_started(host, ev.pid);
        } else if before.is_some_and(|b| b != ev.pid) {
            self.stats.process_deaths += 1;
            self.calls.end_process(host, Some(ev.pid), &self.roles, &mut self.stats, out);
        }
    }

    fn sweep(&mut self, host: HostId, out: &mut Vec<Record>) {
        if let Some(clock) = self.clocks.get(&host) {
            self.sweep_at(host, clock, out);
        }
    }

    /// sweep() of a host whose clock is `clock`.
    fn sweep_at(&mut self, host: HostId, clock: i64, out: &mut Vec<Record>) {
        let horizon = clock - self.allowance_ms - self.timeout_ms;
        self.calls.expire(host, horizon, &self.roles, &mut self.stats, out);
        self.puts.expire(&self.clocks, self.clock_bound, self.allowance_ms, &mut self.stats, out);
    }
}
