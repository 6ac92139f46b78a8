"""Merges the per-rank traces of a run into one Chrome trace event file.

usage: scripts/trace-merge RUN_DIR [--job TAG] [--out FILE]

Every job of a run that sets train.trace_steps writes its own files,
RUN_DIR/trace/TAG-rank-R.json with TAG = job-<UTC start>-<pid of rank 0>, so a
resumed job never overwrites or mixes with an earlier one (of another world size,
say). This merges one job, by default the newest (--job TAG for another; files
named rank-R.json, from older mpiddp, are one unnamed job), into FILE (default
RUN_DIR/trace/TAG-merged.json): one process per rank, named "rank R",
on a common clock. Each rank's timestamps are steady-clock microseconds of its
own host; every rank read its clock right after the same barrier
("clock_sync_us" in its otherData), so shifting each rank by the difference
between rank 0's reading and its own puts them on rank 0's clock, give or take
the barrier's exit spread. Open the result in https://ui.perfetto.dev or
chrome://tracing. Python standard library only.

A trace file that is not such a trace (not JSON, NaN or Infinity, no traceEvents
list, an event that is not an object or lacks a string "ph" and "name", a
non-"M" event without a number "ts", a "dur" that is not a number, no integer
clock_sync_us, two files of one rank) is refused with one line naming the file.
FILE is written to a temporary file next to it and renamed into place; it may
not be one of the rank files.
"""
import argparse
import glob
import json
import math
import os
import re
import sys

from .errors import die, set_program
from .files import refuse_special, same_file, write_atomically


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_event(path, i, event):
    """One line naming the file and the event for what the merge (or a trace viewer) cannot use."""
    where = f"{path}: traceEvents[{i}]"
    if not isinstance(event, dict):
        die(f"{where} is not an object")
    for field in ("ph", "name"):
        if not isinstance(event.get(field), str):
            die(f"{where} has no string \"{field}\"")
    if event["ph"] != "M" and not is_number(event.get("ts")):
        die(f"{where} ({event['name']}) has no number \"ts\"")
    if "ts" in event and not is_number(event["ts"]):
        die(f"{where} ({event['name']}): \"ts\" is not a number")
    if "dur" in event and not (is_number(event["dur"]) and event["dur"] >= 0):
        die(f"{where} ({event['name']}): \"dur\" is not a number >= 0")


def load(path):
    refuse_special(path)
    try:
        with open(path, encoding="utf-8") as f:
            trace = json.load(f, parse_constant=reject_constant)
    except OSError as e:
        die(f"{path}: {e.strerror or e}")
    except RecursionError:
        die(f"{path}: nested too deeply")
    except ValueError as e:  # also UnicodeDecodeError
        die(f"{path}: not JSON ({e})")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        die(f"{path}: not a trace written by mpiddp (no traceEvents list)")
    for i, event in enumerate(trace["traceEvents"]):
        check_event(path, i, event)
    other = trace.get("otherData")
    sync = other.get("clock_sync_us") if isinstance(other, dict) else None
    if not isinstance(sync, int) or isinstance(sync, bool):
        die(f"{path}: no integer clock_sync_us in otherData (not a trace written by mpiddp)")
    return trace


def write_merged(out, data, inputs):
    """DATA (text) to OUT through a temporary file in its directory; never onto an input."""
    for path in inputs:
        if same_file(out, path):
            die(f"cannot write {out}: it is the input {path}")
    if os.path.isdir(out):
        die(f"cannot write {out}: it is a directory")

    def write(temp):
        with open(temp, "w", encoding="utf-8") as f:
            f.write(data)
    write_atomically([(out, write)], lambda path, why: f"cannot write {path}: {why}")


def find_jobs(trace_dir):
    """{job tag: [(rank, path)]} of the rank files in TRACE_DIR; tag "" for files of
    older mpiddp, which named no job (rank-R.json)."""
    jobs = {}
    for path in glob.glob(os.path.join(trace_dir, "*rank-*.json")):
        m = re.fullmatch(r"(?:(job-[^/]+)-)?rank-(\d+)\.json", os.path.basename(path))
        if m:
            jobs.setdefault(m.group(1) or "", []).append((int(m.group(2)), path))
    return {tag: sorted(files) for tag, files in jobs.items()}


def first_step(files):
    """The global step a job started at, from its first rank file (otherData.job_first_step); -1 for files of
    older mpiddp, which did not record it, or a file that does not read."""
    try:
        with open(files[0][1], encoding="utf-8") as f:
            step = json.load(f).get("otherData", {}).get("job_first_step", -1)
        return step if isinstance(step, int) else -1
    except (OSError, ValueError, AttributeError):
        return -1


def choose_job(jobs, wanted, trace_dir):
    """The tag to merge: WANTED, else the newest job: the one that started at the latest global step (a resumed
    job starts where the one before stopped), then the latest tag (tags start with the job's UTC start)."""
    if not jobs:
        die(f"no trace files in {trace_dir} (set train.trace_steps)")
    if wanted is not None:
        if wanted not in jobs:
            die(f"no job {wanted} in {trace_dir}; its jobs: {', '.join(sorted(t or '(unnamed)' for t in jobs))}")
        return wanted
    newest = max(jobs, key=lambda tag: (first_step(jobs[tag]), tag))
    if len(jobs) > 1:
        others = ", ".join(sorted(t or "(unnamed)" for t in jobs if t != newest))
        # Not note(): the tags are printed as they are, as trace-merge always has.
        print(f"trace-merge: note: {len(jobs)} jobs traced this run; merging the newest, {newest} "
              f"(--job TAG for another: {others})", file=sys.stderr)
    return newest


def main(argv=None):
    set_program("trace-merge")
    parser = argparse.ArgumentParser(prog="trace-merge", description="Merge the ranks' traces of one job of a run.")
    parser.add_argument("run_dir")
    parser.add_argument("--out")
    parser.add_argument("--job", help="the job to merge (the job-... prefix of its files; default: the newest)")
    args = parser.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")  # file names that are not UTF-8
    trace_dir = os.path.join(args.run_dir, "trace")
    jobs = find_jobs(trace_dir)
    tag = choose_job(jobs, args.job, trace_dir)
    ranked = jobs[tag]
    for (rank, path), (other, other_path) in zip(ranked, ranked[1:]):
        if rank == other:
            die(f"{path} and {other_path} are both rank {rank}")
    traces = {rank: load(path) for rank, path in ranked}
    sync = {rank: t["otherData"]["clock_sync_us"] for rank, t in traces.items()}
    base = sync[ranked[0][0]]
    events = []
    for rank, trace in traces.items():
        shift = base - sync[rank]
        for event in trace["traceEvents"]:
            event = dict(event, pid=rank)
            if event.get("ph") == "M" and event.get("name") == "process_name":
                event["args"] = {"name": f"rank {rank}"}
            if "ts" in event:
                event["ts"] += shift
            events.append(event)
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
    out = args.out or os.path.join(trace_dir, f"{tag}-merged.json" if tag else "merged.json")
    merged = {"traceEvents": events, "displayTimeUnit": "ms",
              "otherData": {"job": tag, "ranks": [rank for rank, _ in ranked],
                            "clock": f"rank {ranked[0][0]} steady clock"}}
    write_merged(out, json.dumps(merged, separators=(",", ":")), [path for _, path in ranked])
    print(f"{out}: {len(ranked)} rank(s), {len(events)} events")

