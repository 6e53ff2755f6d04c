"""Named scenarios: a SimConfig each, for tests and `dpmstream simulate --scenario`.

Each one makes a feature of real logs certain to appear: no accept lines, synchronous
gets, whole-second stamps, a year rollover, the repeated hour at the end of daylight
saving time, a daemon restart, heavy load; and the logs shaped differently of issue 11:
another process of the daemon, an overlapping restart, one rsyslog file for both
daemons, a clock stepped back, lines stamped an hour ahead. Their features show within
the first 600 requests (about 17 s), as the tests run them.
"""

from __future__ import annotations

from dpmstream.simulator.config import SimConfig

# name -> (description, changes to the defaults)
SCENARIOS: dict[str, tuple[str, dict]] = {
    "thesis": ("the defaults: 3 clients x 25 concurrent puts, 20 fast / 20 slow threads", {}),
    "mixed": ("puts and gets (30%), failures, aborts and abandoned requests",
              {"get_fraction": 0.3, "abort_rate": 0.02, "abandon_rate": 0.02,
               "put_fail_rate": 0.02, "proc_fail_rate": 0.02, "done_fail_rate": 0.01}),
    "no-accept": ("a DPM build without `request accepted` lines",
                  {"accept_lines": False, "get_fraction": 0.3}),
    "sync-get": ("DPM_USE_SYNCGET: gets served in the fast thread, no proc_get",
                 {"sync_get": True, "get_fraction": 0.5}),
    "whole-seconds": ("an older build: stamps without milliseconds",
                      {"whole_seconds": True, "get_fraction": 0.3}),
    "year-end": ("starts on 12/31 23:59:30 local time and runs into the new year",
                 {"start": "2011-12-31 23:59:30", "requests": 2000}),
    "dst-end": ("runs through the repeated hour when daylight saving ends (Europe/Zurich)",
                {"start": "2011-10-30 02:59:40", "tz": "Europe/Zurich", "requests": 2000}),
    "restart": ("the DPM daemon restarts 10 s in: new pid, calls cut, requests processed again",
                {"restart_at": 10.0, "requests": 2000, "get_fraction": 0.3}),
    "heavy": ("heavy load: 8 clients x 40 streams, 50 slow threads, 30% gets (>= 100k lines)",
              {"clients": 8, "concurrency": 40, "sthreads": 50, "fthreads": 40,
               "get_fraction": 0.3, "requests": 5000}),
    "stray-pids": ("another DPM process (pid 23456) logs 6 times: 4 probe pings on its own "
                   "threads, 2 main-thread lines, while the real daemon runs",
                   {"stray_lines": 6, "get_fraction": 0.3}),
    "overlap-restart": ("a restart 6 s in where the old process finishes its calls for 4 s "
                        "after the new pid starts; the calls still open then never return",
                        {"restart_at": 6.0, "restart_overlap": 4.0, "requests": 2000,
                         "get_fraction": 0.3}),
    "mixed-syslog": ("both daemons in one rsyslog file PREFIX.messages (tags dpm, dpns) "
                     "among other programs' lines, besides the separate logs",
                     {"syslog_file": True, "get_fraction": 0.3}),
    "clock-step": ("the head node's clock steps back 30 s, 8 s in (NTP): DPM and DPNS "
                   "stamps go back",
                   {"clock_step_at": 8.0, "clock_step_s": 30.0, "get_fraction": 0.3}),
    "future-line": ("one DPM line stamped an hour ahead of its neighbours",
                    {"future_lines": 1}),
    "future-lines": ("three DPM lines stamped an hour ahead, at random points",
                     {"future_lines": 3, "get_fraction": 0.3}),
    # Name-server linking (issue 13).
    "same-dir": ("the thesis's hot directory: every file in one directory, one DPNS lock",
                 {"same_dir": True}),
    "many-dirs": ("files spread over 50 directories", {"dirs": 50}),
    "multi-file": ("puts and gets of 4 files each (one DPNS call per file)",
                   {"files": 4, "get_fraction": 0.3}),
    "gets-statg": ("mostly gets: the slow thread looks each file up with statg",
                   {"get_fraction": 0.8}),
    "dpns-gap": ("the DPNS log lacks the lines of 4 s to 9 s: fewer linked calls then",
                 {"dpns_gap": (4.0, 9.0), "get_fraction": 0.3}),
    "ns-clients": ("the name server sees the head node by its short name (dpmhead01), and "
                   "disk nodes and an SRM front end call it too (issue 27)",
                   {"ns_head_client": "dpmhead01", "ns_other_clients": True,
                    "get_fraction": 0.3}),
}


def names() -> list[str]:
    return list(SCENARIOS)


def scenario(name: str, **overrides) -> SimConfig:
    """The SimConfig of scenario `name`, with `overrides` applied on top."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    changes = dict(SCENARIOS[name][1])
    changes.update(overrides)
    return SimConfig(**changes)
