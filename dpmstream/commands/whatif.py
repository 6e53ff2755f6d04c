"""`dpmstream whatif`: calibrate the simulator on a log and predict the effect of tuning.

Reads the logs with the replay core, fits the model (simulator/calibrate.py), runs it at
the current settings and at the requested ones with several seeds, checks that the
current run reproduces what the log shows, and writes DIR/prediction.csv.

Exit status: 0 when the model at the current settings reproduces every observed p50 it
was fitted to within 10%; 3 when it misses one (the prediction is still written, but
is uncertain); 2 for bad options; 1 when nothing could be read.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

from dpmstream.commands.common import (
    add_log_options, bounded, checked_profile, checked_zone, default_host, reassembly_settings,
    positive_int, setup_logging,
)

RATE_SCALE = (1e-3, 1e3)        # --rate-scale within these: the model's events stay bounded
MAX_STREAMS = 100_000           # client streams of a closed-loop model, at most
EXIT_MISFIT = 3                 # the current model misses an observed p50 by over 10%

CSV_COLUMNS = ("scenario", "op", "phase", "p50", "p95", "p99", "count",
               "p50_min", "p50_max", "p95_min", "p95_max", "p99_min", "p99_max")


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(
        name, help=help_text, description=__doc__)
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="DPM log(s), and the DPNS log for the name-server lock")
    add_log_options(p)
    p.add_argument("--out", required=True, metavar="DIR", help="write DIR/prediction.csv")
    p.add_argument("--fthreads", type=positive_int, metavar="N", help="what-if: fast threads")
    p.add_argument("--sthreads", type=positive_int, metavar="N", help="what-if: slow threads")
    p.add_argument("--backlog", type=positive_int, metavar="N", help="what-if: listen backlog")
    dirs = p.add_mutually_exclusive_group()
    dirs.add_argument("--dirs", type=positive_int, metavar="N",
                      help="what-if: new files spread over N directories")
    dirs.add_argument("--spread-dirs", action="store_true",
                      help="what-if: every new file in a directory of its own (no shared lock)")
    p.add_argument("--rate-scale", type=bounded(float, "a number", *RATE_SCALE), default=1.0, metavar="X",
                   help="what-if: X times the load: replayed arrivals X times as close "
                        "together, or a closed loop with X times the streams (default: 1; "
                        f"within {RATE_SCALE[0]:g}..{RATE_SCALE[1]:g})")
    p.add_argument("--current-fthreads", type=positive_int, metavar="N",
                   help="the fast threads in use, when known (default: from the thread ids seen)")
    p.add_argument("--current-sthreads", type=positive_int, metavar="N",
                   help="the slow threads in use, when known (default: the most processing runs at once)")
    p.add_argument("--load", choices=("auto", "replay", "closed"), default="auto",
                   help="replay: each request at its logged instant (an open load); closed: each "
                        "client keeps as many requests going as it did (the load rises when the "
                        "node answers faster); auto: closed when each client's count of requests in "
                        "flight hardly varies (default)")
    p.add_argument("--seeds", type=positive_int, default=3, metavar="K",
                   help="model runs per scenario (default: 3)")
    p.add_argument("--model-requests", type=positive_int, default=20000, metavar="N",
                   help="requests per model run, at most (a closed loop runs N; replayed "
                        "arrivals: the first N) (default: 20000)")
    p.set_defaults(func=run, nothing_left_at_exit=True)


def read_records(files: list[str], args) -> tuple[list[dict], list[dict], object, list[int]]:
    """Every request and call record of the files, through the replay loop: the DPM and
    DPNS logs side by side in event time, so that name-server calls link to requests;
    and the thread of every call the DPM's fast threads served."""
    from dpmstream.parsers import engines
    from dpmstream.parsers.pipeline import Pipeline
    from dpmstream.report.spans import busy_spans
    from dpmstream.streams.inputs import InputError, describe
    from dpmstream.streams.progress import Progress
    from dpmstream.streams.replay_files import replay_inputs

    requests, calls = [], []

    def keep(record: dict) -> None:
        (requests if record["kind"] == "request" else calls).append(record)

    try:
        inputs = [describe(name) for name in files]
    except InputError as exc:
        raise ValueError(str(exc)) from None
    pipeline = Pipeline(keep, reassembly_settings(args))
    # The threads the fast daemon's calls ran on, gathered in the compiled engine where
    # it runs (the report's collector of busy spans: no call into Python per call).
    spans = busy_spans(engines.is_compiled(pipeline.reassembler))
    pipeline.reassembler.on_span = spans
    failures, _ = replay_inputs(
        pipeline, inputs, host=default_host(args.host), profile=checked_profile(args.profile),
        tz=checked_zone(args.tz), year=args.year, progress=Progress(None, enabled=False),
        command="dpmstream whatif")
    if failures:
        raise ValueError(f"{failures} of {len(inputs)} inputs could not be read whole")
    return requests, calls, pipeline.stats, spans.fast_thread_ids()


def whatif_config(current, args):
    """The current SimConfig with the requested changes."""
    from dpmstream.simulator.calibrate import SPREAD_DIRS

    changes = {}
    for name in ("fthreads", "sthreads", "backlog"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.dirs is not None or args.spread_dirs:
        # The log's directories give way to new ones, each with the pooled hold.
        changes["dirs"] = args.dirs if args.dirs is not None else SPREAD_DIRS
        changes["dir_shares"] = None
        changes["service"] = current.service.replace(dpns_creat_dirs=())
    if args.rate_scale != 1.0:
        if current.arrivals is not None:     # the same requests, X times as close together
            changes["arrivals"] = tuple((int(round(at / args.rate_scale)), op, client)
                                        for at, op, client in current.arrivals)
        else:                                # a closed loop: X times as many streams
            changes["concurrency"] = max(1, int(round(current.concurrency * args.rate_scale)))
            if changes["concurrency"] * current.clients > MAX_STREAMS:
                raise ValueError(
                    f"--rate-scale {args.rate_scale:g}: {current.clients} clients x "
                    f"{changes['concurrency']} streams is more than the model runs "
                    f"({MAX_STREAMS} streams at most)")
    return current.replace(**changes), changes


def run(args) -> int:
    # The records read stay to the end, and calibration and the model's runs make
    # short-lived containers by the thousand: at CPython's pace, every tenth young
    # collection walked the records again. The young generation is collected at the
    # worker's pace, as report does (streams/gc_pace.py; issue 30: on the thesis log
    # 2,202 M -> 2,181 M instructions, CPU 3% less). Freezing the records as report does
    # saved 6 M more, not worth a second freeze to thaw.
    from dpmstream.streams.gc_pace import relaxed_gc
    with relaxed_gc():
        return _run(args)


def _run(args) -> int:
    from dpmstream.simulator.calibrate import SHOWN_DIRS, calibrate
    from dpmstream.simulator.observe import compare, measure_all, observations
    from dpmstream.simulator.predict import (
        FIT_FLOOR_S, fit_check, limit_model, phase_table, predict,
    )

    setup_logging(args.verbose, deferred=True)   # whatif's messages: parsers/lazylog's
    if not (args.fthreads or args.sthreads or args.backlog or args.dirs or args.spread_dirs
            or args.rate_scale != 1.0):
        print("dpmstream whatif: nothing to change: give --fthreads, --sthreads, --backlog, "
              "--dirs, --spread-dirs or --rate-scale", file=sys.stderr)
        return 2
    requests, calls, stats, fast_ids = read_records(args.files, args)
    if not stats.total("parsed"):
        print("dpmstream whatif: no DPM, DPNS or SRM line was parsed", file=sys.stderr)
        return 1
    cal = calibrate(requests, calls, load=args.load, fast_thread_ids=fast_ids)
    current = cal.config
    if args.current_fthreads:
        current = current.replace(fthreads=args.current_fthreads)
    if args.current_sthreads:
        current = current.replace(sthreads=args.current_sthreads)
    current, cut = limit_model(current, args.model_requests)
    if cut and current.arrivals is not None:
        print(f"note: the model replays the first {args.model_requests} arrivals (--model-requests)")
    target, changes = whatif_config(current, args)

    print(render_estimates(cal, current))
    seeds = tuple(range(1, args.seeds + 1))
    obs = observations(cal.directories, SHOWN_DIRS)
    now = predict(current, seeds, observations=obs)
    then = predict(target, seeds)
    observed = phase_table(requests)
    floor_s = max(2 * cal.resolution_ms / 1000, FIT_FLOOR_S)
    checks = fit_check(observed, now, floor_s)
    params = compare(obs, measure_all(obs, requests, calls), now.observed,
                     max(2.0, 2 * cal.resolution_ms))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_prediction_csv(out / "prediction.csv", now, then)
    print()
    print(render_parameters(params))
    print()
    print(f"what-if: {describe_changes(changes, current, args.rate_scale)}; {len(seeds)} seeds each "
          f"({now.requests // len(seeds)} requests per run)")
    print(render_table(observed, now, then))
    print()
    print(render_growth(requests, calls, now, then))
    print()
    misfit = report_fit(checks, params, floor_s)
    if cal.resolution_ms >= 1000:
        print("note: whole-second stamps: phases shorter than a few seconds are not measured "
              "to better than a second, so the fit check allows 2 s, and the load's shape "
              "(closed loop or not) is hard to tell")
    for line in cal.warnings:
        print(f"note: {line}")
    print(f"\nwrote {out / 'prediction.csv'}")
    if misfit:
        print(f"dpmstream whatif: the model at the current settings misses {misfit} observed "
              f"p50(s) by more than 10%: the prediction in {out / 'prediction.csv'} is "
              f"uncertain (exit {EXIT_MISFIT})", file=sys.stderr)
        return EXIT_MISFIT
    return 0



def report_fit(checks, params, floor_s: float) -> int:
    """Print whether the current model reproduces the log; the number of p50s it misses."""
    from dpmstream.simulator.predict import MISS_HINTS

    misses = [c for c in checks if not c.ok]
    param_misses = [p for p in params if not p.ok]
    if checks and not misses and not param_misses:
        print(f"fit: the model at the current settings reproduces the observed p50 of every "
              f"phase within 10% (or {floor_s * 1000:.0f} ms): {len(checks)} checked, and "
              f"every parameter's observation above")
    elif not checks:
        print("fit: WARNING: too few requests to check the model against the log")
    else:
        print(f"fit: WARNING: the model does not fit this log: {len(misses)} of {len(checks)} "
              f"phases and {len(param_misses)} of {sum(p.obs.checked for p in params)} "
              f"parameter observations off by more than 10% at the current settings; the "
              f"what-if is uncertain there:")
        for c in misses:
            print(f"  {c.op} {c.phase}: observed {c.observed:.3f} s, modelled {c.modelled:.3f} s "
                  f"({MISS_HINTS.get(c.phase, '')})")
        for p in param_misses:
            print(f"  {p.obs.parameter}: {p.obs.what}: observed {_obs_num(p.logged, p.obs.unit)}, "
                  f"modelled {_obs_num(p.modelled, p.obs.unit)}")
    return len(misses) + len(param_misses)


def render_parameters(params) -> str:
    width = max([9] + [len(p.obs.parameter) for p in params])
    lines = ["each fitted parameter: what it was fitted to, in the log and in the model at "
             "the current settings (median over seeds):",
             f"  {'parameter':<{width}}  {'observation':<38}  {'log':>10}  {'model':>10}"]
    for p in params:
        mark = "" if p.ok else "  MISS (> 10%)"
        if not p.obs.checked:
            mark = "  (not checked)"
        lines.append(f"  {p.obs.parameter:<{width}}  {p.obs.what:<38}  "
                     f"{_obs_num(p.logged, p.obs.unit):>10}  {_obs_num(p.modelled, p.obs.unit):>10}{mark}")
    return "\n".join(lines)


def _obs_num(value, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value / 1000:.3f} s"
    if unit == "share":
        return f"{value:.3f}"
    if unit == "/s":
        return f"{value:.1f}/s"
    return f"{value:g}"


def render_growth(requests, calls, now, then) -> str:
    """Does a queue grow over the run (arrivals outrunning a resource), in the log, the
    current model and the what-if?"""
    from dpmstream.simulator.estimators import median
    from dpmstream.simulator.observe import growth, grows

    logged = growth(requests, calls)

    def cell(pair) -> str:
        if pair is None:
            return f"{'-':<24}"
        first, last = pair
        word = "grows" if grows(first, last) else "steady"
        return f"{first / 1000:>7.3f} -> {last / 1000:>7.3f} {word:<6}"

    def pooled(pred, phase):
        pairs = [g[phase] for g in pred.growth if phase in g]
        return (median([a for a, _ in pairs]), median([b for _, b in pairs])) if pairs else None

    lines = ["queues over the run: p50 (s) in the first quarter of the arrivals -> the last "
             "(a queue that grows: arrivals outran a resource)",
             f"  {'phase':<9} {'log':<24} {'current model':<24} {'what-if':<24}"]
    for phase, resource in (("queue", "slow threads"), ("proc", "locks, name server"),
                            ("ns creat", "directory locks")):
        if phase not in logged:          # e.g. no DPNS log: the model's creates are no news
            continue
        lines.append(f"  {phase:<9} {cell(logged.get(phase))} {cell(pooled(now, phase))} "
                     f"{cell(pooled(then, phase))}  ({resource})")
    return "\n".join(lines)


def describe_changes(changes: dict, current, rate_scale: float) -> str:
    parts = []
    for name, value in changes.items():
        if name in ("arrivals", "concurrency", "dir_shares", "service"):
            continue
        before = getattr(current, name)
        if name == "dirs":
            from dpmstream.simulator.calibrate import SPREAD_DIRS
            show = lambda d: "spread" if d is None or d >= SPREAD_DIRS else str(d)
            if current.dir_shares is not None:
                before = f"the log's {len(current.dir_shares)}"
            else:
                before = show(before)
            parts.append(f"dirs {before} -> {show(value)}")
        else:
            parts.append(f"{name} {before} -> {value}")
    if "arrivals" in changes or "concurrency" in changes:
        parts.append(f"arrival rate x{rate_scale:g}")
    return ", ".join(parts)


def render_estimates(cal, config) -> str:
    lines = ["calibrated on the log (95% intervals: of a median from its order statistics, "
             "of a share Wilson's, of the directories from the mean create wait's):"]
    for e in cal.estimates:
        value = _num(e.value, e.unit)
        interval = ""
        if e.low is not None and e.high is not None:
            interval = f" [{_num(e.low, e.unit)} .. {_num(e.high, e.unit)}]"
        count = f" n={e.n}" if e.n else ""
        lines.append(f"  {e.name:<30} {value}{interval}{count}  {e.how}")
    lines.append(f"  model: {config.fthreads} fast, {config.sthreads} slow, {config.dpns_threads} "
                 f"name-server threads, backlog {config.backlog}")
    return "\n".join(lines)


def _num(value, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if unit == "s":
        return f"{value:.3f} s"
    if unit in ("share", "ratio"):
        return f"{value:.3f}"
    if unit == "dirs":
        return f"{value:.1f}"
    return f"{value:g}" + (f" {unit}" if unit else "")


def render_table(observed: dict, now, then) -> str:
    from dpmstream.simulator.estimators import quantile
    from dpmstream.simulator.predict import PHASE_NAMES

    head = (f"{'op':<4} {'phase':<11} {'observed p50':>12} {'p95':>7}   "
            f"{'current p50 [seeds]':>26} {'p95':>7}   {'what-if p50 [seeds]':>26} {'p95':>7}")
    rows = [head]
    keys = sorted({k for k in list(now.pooled) + list(then.pooled) + list(observed)},
                  key=lambda k: (k[0], PHASE_NAMES.index(k[1])))
    for key in keys:
        vals = observed.get(key)
        obs50 = f"{quantile(vals, .5) / 1000:.3f}" if vals else "-"
        obs95 = f"{quantile(vals, .95) / 1000:.3f}" if vals else "-"
        cells = []
        for pred in (now, then):
            q = pred.pooled.get(key)
            if q is None:
                cells.append(f"{'-':>26} {'-':>7}")
                continue
            lo, hi = pred.spread(key, "p50")
            cells.append(f"{q['p50']:>10.3f} [{lo:.3f}..{hi:.3f}] {q['p95']:>7.3f}")
        rows.append(f"{key[0]:<4} {key[1]:<11} {obs50:>12} {obs95:>7}   {cells[0]}   {cells[1]}")
    return "\n".join(rows)


def write_prediction_csv(path: Path, now, then) -> None:
    from dpmstream.simulator.predict import PHASE_NAMES

    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for scenario, pred in (("current", now), ("whatif", then)):
            for key in sorted(pred.pooled, key=lambda k: (k[0], PHASE_NAMES.index(k[1]))):
                q = pred.pooled[key]
                row = [scenario, key[0], key[1]] + [f"{q[n]:.3f}" for n in ("p50", "p95", "p99")]
                row.append(q["count"])
                for name in ("p50", "p95", "p99"):
                    lo, hi = pred.spread(key, name)
                    row += [f"{lo:.3f}", f"{hi:.3f}"]
                writer.writerow(row)
