"""Where the traced steps' time goes: a share per layer kind, and the rest.

usage: scripts/trace-shares RUN_DIR [--job TAG] [--device] [--json]

Reads one job's per-rank traces (train.trace_steps; the newest job unless --job)
and splits the time of its traced steps ("step N" spans) on the host track by
what ran: every layer's forward and backward span carries its kind (args.kind:
Conv2d, BatchNorm2d, ...; a layer inside a residual block has its own span, and
the block keeps only the time outside its layers, the addition and a ReLU it
took in, as Residual),
"loss", "optimizer", "all-reduce wait" (gradient wait and parameter all-gather:
communication the step did not hide), "data" (data wait, staging the batch) and
"other" (the rest of the step: agreement, checkpoints, bookkeeping). Each span
counts its own time less that of the spans nested in it, so the shares add up to
100%. The shares are averaged over the ranks. Printed as one line, largest first:
  Conv2d 48.1%, BatchNorm2d 17.9%, ReLU 6.2%, ... (2 ranks, 20 steps)
--json prints {"shares": {...}, "ranks": R, "steps": S, "step_ms": M} instead (M: the mean
traced step of the slowest rank, in milliseconds).
--device splits the GPU's time instead: the spans of the track "device (compute stream)", when
the compute stream reached each span's start and end (a GPU run's trace has them). A device span
is named as its host span and takes that span's kind; a step's time that no span of it covers
(the GPU waiting for the host) counts as "other".
"""
import argparse
import json
import os
import re
import sys

from .errors import die, set_program
from .trace_merge import choose_job, find_jobs, load

COMMUNICATION = {"gradient wait", "parameter all-gather"}
DATA = {"data wait", "stage batch", "prefetch"}
OWN = {"loss", "optimizer"}


HOST_TRACK, DEVICE_TRACK = 0, 1  # tids: the host's spans, the GPU compute stream's (kTraceDeviceTrack)


def category(span, kinds):
    """What a span's own time counts as; KINDS: the layer kind of each span name (the host spans' args.kind)."""
    args = span.get("args")
    if isinstance(args, dict) and isinstance(args.get("kind"), str):
        return args["kind"]
    name = span["name"]
    if name in kinds:
        return kinds[name]
    if name in COMMUNICATION:
        return "all-reduce wait"
    if name in DATA:
        return "data"
    return name if name in OWN else "other"


def span_kinds(trace):
    """{span name: layer kind} from the host track's layer spans."""
    return {e["name"]: e["args"]["kind"] for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("tid") == HOST_TRACK and isinstance(e.get("args"), dict)
            and isinstance(e["args"].get("kind"), str)}


def rank_times(trace, track=HOST_TRACK):
    """({category: nanoseconds of own time inside traced steps}, step nanoseconds, steps) of one rank's TRACK."""
    kinds = span_kinds(trace)
    # Nesting is decided on whole nanoseconds (the tracer's unit; the file's microseconds carry them as
    # fractions), so rounding cannot put a span that starts where another ends inside it. A parent comes
    # before a child that starts with it: the larger first, and at equal extent the later in the file
    # (spans are written as they close, children first).
    spans = []
    for order, e in enumerate(trace["traceEvents"]):
        if e["ph"] == "X" and e.get("tid") == track and "dur" in e:
            start = round(e["ts"] * 1000)
            spans.append(dict(e, ts=start, dur=round(e["dur"] * 1000), order=order))
    spans.sort(key=lambda e: (e["ts"], -e["dur"], -e["order"]))
    times, step_time, steps = {}, 0.0, 0
    stack = []  # [span, own time so far, inside a step]
    def close(entry):
        span, own, in_step = entry
        if in_step and not re.fullmatch(r"step \d+", span["name"]):
            times[category(span, kinds)] = times.get(category(span, kinds), 0.0) + own
    for span in spans:
        while stack and span["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
            close(stack.pop())
        in_step = bool(stack and stack[-1][2])
        if re.fullmatch(r"step \d+", span["name"]):
            in_step = True
            step_time += span["dur"]
            steps += 1
        if stack:
            stack[-1][1] -= span["dur"]  # the parent's own time excludes this child
        stack.append([span, span["dur"], in_step])
    while stack:
        close(stack.pop())
    # A step's own time (between its top-level spans) is bookkeeping.
    own_steps = step_time - sum(times.values())
    if own_steps > 0:
        times["other"] = times.get("other", 0.0) + own_steps
    return times, step_time, steps


def shares(run_dir, job=None, track=HOST_TRACK):
    """({category: share of the traced steps' time}, ranks, steps per rank, mean step in ms of the slowest rank)."""
    trace_dir = os.path.join(run_dir, "trace")
    jobs = find_jobs(trace_dir)
    tag = choose_job(jobs, job, trace_dir)
    total, per_rank_steps, step_ms = {}, [], 0.0
    for _, path in jobs[tag]:
        times, step_time, steps = rank_times(load(path), track)
        if steps == 0 or step_time <= 0:
            if track == DEVICE_TRACK:
                die(f"{path}: no traced step on the device track (a trace of a GPU run has one)")
            die(f"{path}: no traced step (set train.trace_steps and train for more than train.trace_after steps)")
        for name, t in times.items():
            total[name] = total.get(name, 0.0) + t / step_time / len(jobs[tag])
        per_rank_steps.append(steps)
        step_ms = max(step_ms, step_time / steps / 1e6)
    return dict(sorted(total.items(), key=lambda item: -item[1])), len(jobs[tag]), min(per_rank_steps), step_ms


def main(argv=None):
    set_program("trace-shares")
    parser = argparse.ArgumentParser(prog="trace-shares", description="Share of the traced steps' time per layer kind.")
    parser.add_argument("run_dir")
    parser.add_argument("--job", help="the job to read (the job-... prefix of its files; default: the newest)")
    parser.add_argument("--device", action="store_true", help="the GPU compute stream's time, not the host's")
    parser.add_argument("--json", action="store_true", help="JSON for scripts")
    args = parser.parse_args(argv)
    table, ranks, steps, step_ms = shares(args.run_dir, args.job, DEVICE_TRACK if args.device else HOST_TRACK)
    if args.json:
        print(json.dumps({"shares": table, "ranks": ranks, "steps": steps, "step_ms": step_ms}))
    else:
        print(", ".join(f"{name} {100 * share:.1f}%" for name, share in table.items()) +
              f" ({ranks} rank{'s' if ranks != 1 else ''}, {steps} steps)")
    return 0
