"""Collects every run of a sweep into one table, best first.

usage: scripts/sweep-summary DIR [--metric test_accuracy] [--ascending] [--format md|csv] [--plot FILE.png|.svg]

Reads DIR/runs.tsv (written by scripts/sweep) and each run's summary.json and
exit_code. Status: completed, preempted (stopped after a checkpoint, will resume),
failed (non-zero exit, or ended without a summary), pending (not started).

--plot draws the metric of every completed run against each swept key (a key
some run's overrides set), one panel per key; runs that leave a key at the base
file's value are drawn at "base". Needs matplotlib (Debian: python3-matplotlib).
The plot is written to a temporary file next to FILE and renamed into place.

A completed run without the metric (missing, null, not a number, NaN) shows `-`
in that column and is listed after the ranked runs, with a note saying how many.
"""
import argparse
import csv
import os
import sys

from . import plotting
from .errors import die, note, printable, set_program
from .files import write_atomically
from .runs import RUNS, number, read_runs_tsv, read_summary, read_text

COLUMNS = ["test_accuracy", "test_loss", "final_train_loss", "epochs", "world_size", "global_batch",
           "train_samples_per_s", "wall_s"]


def load(directory):
    runs = []
    for index, name, run_dir, overrides in read_runs_tsv(os.path.join(directory, RUNS)):
        row = {"index": index, "name": name, "overrides": overrides}
        summary_path = os.path.join(run_dir, "summary.json")
        code_path = os.path.join(run_dir, "exit_code")
        code = read_text(code_path)
        code = code.strip() if code is not None else None
        summary = read_summary(summary_path)
        if code not in (None, "0", "75"):
            row["status"] = f"failed (exit {printable(code)})"
        elif summary.get("status") == "completed":
            row["status"] = "completed"
        elif summary.get("status") == "preempted" or code == "75":
            row["status"] = "preempted"
        elif code == "0":
            row["status"] = "failed (no summary)"
        else:
            row["status"] = "pending" if not os.path.isdir(run_dir) else "running"
        for column in COLUMNS:
            value = summary.get(column)
            row[column] = value if number(value) is not None else (value if isinstance(value, str) else None)
        runs.append(row)
    return runs


def swept_values(runs):
    """key -> [(value text, run)] for every key that a run's overrides set."""
    keys = {}
    for r in runs:
        for assignment in r["overrides"].split():
            key, _, value = assignment.partition("=")
            keys.setdefault(key, []).append((value, r))
    return keys


def as_number(text):
    try:
        return float(text)
    except ValueError:
        return None


def shown(value):
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else printable(str(value))


def import_pyplot(path):
    """matplotlib's pyplot without a display; checked before the table is printed."""
    plotting.check_image_name("--plot", path)
    if os.path.isdir(path):
        die(f"--plot {path}: is a directory")
    return plotting.import_pyplot("--plot ")


def plot(pyplot, runs, metric, path):
    """One panel per swept key: the metric of each completed run against the key's value."""
    keys = swept_values(runs)
    if not keys:
        die("--plot: no run sets a key (nothing was swept)")
    figure, axes = pyplot.subplots(1, len(keys), figsize=(4.5 * len(keys), 4), squeeze=False)
    described = []
    for ax, key in zip(axes.flat, sorted(keys)):
        chosen = {id(r): value for value, r in keys[key]}
        points = [(chosen.get(id(r), "base"), r[metric]) for r in done_runs(runs, metric)]
        numbers = [as_number(v) for v, _ in points]
        if points and all(n is not None for n in numbers):
            xs = numbers
            if min(xs) > 0 and max(xs) / min(xs) >= 10:
                ax.set_xscale("log")
        else:  # categories (layer widths, names, "base"): base first, then numbers in order, then text
            def place(v):
                n = as_number(v)
                return (v != "base", n is None, n if n is not None else 0.0, v)
            order = sorted(set(v for v, _ in points), key=place)
            xs = [order.index(v) for v, _ in points]
            ax.set_xticks(range(len(order)), order, rotation=30, ha="right")
        ax.plot(xs, [m for _, m in points], "o", gid=f"sweep:{key}")
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
        ax.grid(True, alpha=0.3)
        described.append(f"{key} ({len(points)} runs)")
    figure.tight_layout()
    extension = os.path.splitext(path)[1].lower()[1:]
    write_atomically([(path, lambda temp: figure.savefig(temp, dpi=100, format=extension))],
                     lambda _, why: f"--plot {path}: cannot write ({why})")
    print(f"plotted {metric} against {', '.join(described)} into {path}", file=sys.stderr)


def done_runs(runs, metric):
    """Completed runs with a number for the metric: the ranked ones."""
    return [r for r in runs if r["status"] == "completed" and number(r[metric]) is not None]


def main(argv=None):
    set_program("sweep-summary")
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--metric", default="test_accuracy")
    parser.add_argument("--ascending", action="store_true", help="smaller is better (losses)")
    parser.add_argument("--format", choices=["md", "csv"], default="md")
    parser.add_argument("--plot", metavar="FILE", help="also draw the metric against each swept key (.png or .svg)")
    args = parser.parse_args(argv)
    if args.metric not in COLUMNS:
        die(f"--metric must be one of {', '.join(COLUMNS)}")
    pyplot = import_pyplot(args.plot) if args.plot else None
    runs = load(args.dir)
    done = done_runs(runs, args.metric)
    rest = [r for r in runs if r not in done]
    done.sort(key=lambda r: number(r[args.metric]), reverse=not args.ascending)
    # Completed runs without the metric come right after the ranked ones, then the others, in sweep order.
    unranked = [r for r in rest if r["status"] == "completed"]
    ordered = done + sorted(rest, key=lambda r: (r["status"] != "completed", r["index"]))
    header = ["rank", "name", "status", *COLUMNS, "overrides"]
    table = []
    for place, r in enumerate(ordered, 1):
        values = [shown(r[c]) for c in COLUMNS]
        table.append([str(place) if r in done else "-", printable(r["name"]), r["status"], *values,
                      printable(r["overrides"])])
    if args.format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(header)
        writer.writerows(table)
    else:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in table:
            print("| " + " | ".join(row) + " |")
    failed = [r for r in runs if r["status"].startswith("failed")]
    if unranked:
        note(f"{len(unranked)} completed run(s) have no {args.metric} (null, missing or not a number): listed "
             f"after the ranked runs, unranked")
    completed = len(done) + len(unranked)
    print(f"\n{completed} completed, {len(failed)} failed, {len(runs) - completed - len(failed)} other",
          file=sys.stderr)
    if args.plot:
        plot(pyplot, runs, args.metric, args.plot)

