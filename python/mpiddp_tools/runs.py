"""What a run and a sweep leave on disk: run.dir/summary.json, run.dir/metrics.jsonl, and a sweep's DIR/runs.tsv
(one line per run: index, name, run dir, overrides, tab-separated; written by scripts/sweep, read by
scripts/sweep-summary and by the array tasks of scripts/mpiddp.sbatch)."""
import json
import math

from .errors import die
from .files import read_lines, refuse_special

# Files of a sweep itself in its DIR: no run may be named like them.
RUNS, BASE = "runs.tsv", "base.ini"


def read_text(path):
    """A small file's text (undecodable bytes replaced); None if it is missing or unreadable."""
    refuse_special(path)
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def read_summary(path):
    """A run's summary.json as a dict; {} when it is missing, unreadable, not JSON or not an object (a run
    still being written, or damaged: its status says so)."""
    text = read_text(path)
    try:
        summary = json.loads(text) if text is not None else {}
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return {}
    return summary if isinstance(summary, dict) else {}


def read_records(path):
    """The records of one metrics.jsonl; a torn last line (a crash mid-write) is skipped. Raises OSError."""
    records = []
    refuse_special(path)
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8", "replace").splitlines()  # a damaged byte spoils its line, not the file
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def number(value):
    """A metric as a float, or None when it is missing, null, not a number, or not finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def runs_tsv(rows):
    """runs.tsv's bytes: rows of (index, name, run dir, overrides)."""
    return "".join("\t".join(map(str, row)) + "\n" for row in rows).encode()


def read_runs_tsv(path):
    """runs.tsv's rows as (index, name, run dir, overrides); one error line for a line scripts/sweep did not
    write."""
    rows = []
    for number_, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        index, name, run_dir, overrides = (line.split("\t") + [""] * 4)[:4]
        try:
            index = int(index)
        except ValueError:
            die(f"{path}:{number_}: not index<TAB>name<TAB>run dir<TAB>overrides (written by scripts/sweep)")
        if not run_dir:
            die(f"{path}:{number_}: no run dir")
        rows.append((index, name, run_dir, overrides))
    return rows
