"""Plots the metrics.jsonl of one or more runs in one figure.

usage: scripts/plot RUN_DIR... [--out FILE.png|FILE.svg] [--describe]

Four panels: training loss against global step (log scale), test accuracy and
test loss against epoch, training samples/s against global step. Each run is one
curve per panel, labelled by its run directory's name. A record that appears
twice (a run resumed from an older mpiddp that did not cut metrics.jsonl back)
counts once, the later one, and points are drawn in step order, so a resumed run
is one unbroken curve. --describe prints each curve drawn (panel, run, points).

Needs matplotlib (Debian: python3-matplotlib; run with /usr/bin/python3 where
python3 is another Python).
"""
import os
import sys

from .cli import parser_from_doc
from .errors import die, set_program
from .plotting import check_image_name, import_pyplot
from .runs import read_records

# (panel title, record type, x key, y key, x label, log y)
PANELS = [
    ("training loss", "train", "global_step", "loss", "global step", True),
    ("test accuracy", "eval", "epoch", "test_accuracy", "epoch", False),
    ("test loss", "eval", "epoch", "test_loss", "epoch", False),
    ("samples/s", "train", "global_step", "samples_per_s", "global step", False),
]
# A sequence model's run (data.context): its loss is per token; bits per token and tokens/s instead.
TOKEN_PANELS = [
    ("training loss (nats/token)", "train", "global_step", "loss", "global step", True),
    ("test bits/token", "eval", "epoch", "test_bits_per_token", "epoch", False),
    ("test loss (nats/token)", "eval", "epoch", "test_loss", "epoch", False),
    ("tokens/s", "train", "global_step", "tokens_per_s", "global step", False),
]


def read_run(path):
    """A run's metrics.jsonl records, or one error line when it cannot be read."""
    try:
        return read_records(path)
    except OSError as e:
        die(f"{path}: {e.strerror}")


def curve(records, kind, x_key, y_key):
    """(xs, ys) in x order, one point per x (the last record wins), nulls left out."""
    points = {}
    for r in records:
        if r.get("type") == kind and isinstance(r.get(x_key), (int, float)) and isinstance(r.get(y_key), (int, float)):
            points[r[x_key]] = r[y_key]
    xs = sorted(points)
    return xs, [points[x] for x in xs]


def run_label(run_dir):
    return os.path.basename(os.path.normpath(run_dir))


def main(argv=None):
    set_program("plot", escape=False)  # its messages have never been escaped
    parser = parser_from_doc(__doc__)
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (each with metrics.jsonl)")
    parser.add_argument("--out", default="metrics.png", help="image to write, .png or .svg (default metrics.png)")
    parser.add_argument("--describe", action="store_true", help="print every curve drawn")
    args = parser.parse_args(argv)
    check_image_name("--out", args.out)
    runs = [(run_label(d), read_run(os.path.join(d, "metrics.jsonl"))) for d in args.runs]
    pyplot = import_pyplot()

    tokens = any("tokens_per_s" in r or "test_bits_per_token" in r for _, records in runs for r in records)
    figure, axes = pyplot.subplots(2, 2, figsize=(11, 8))
    for ax, (title, kind, x_key, y_key, x_label, log_y) in zip(axes.flat, TOKEN_PANELS if tokens else PANELS):
        for label, records in runs:
            xs, ys = curve(records, kind, x_key, y_key)
            if not xs:
                continue
            # One marker per point where there are few (eval records: one per epoch).
            ax.plot(xs, ys, label=label, marker="o" if len(xs) <= 30 else None, markersize=3,
                    gid=f"curve:{title}:{label}")
            if args.describe:
                print(f"{title}: {label}: {len(xs)} points, {x_key} {xs[0]:g}..{xs[-1]:g}")
        if log_y and ax.lines and all(y > 0 for line in ax.lines for y in line.get_ydata()):
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(x_label)
        ax.xaxis.get_major_locator().set_params(integer=True)  # steps and epochs are whole numbers
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no records", ha="center", va="center", transform=ax.transAxes)
    figure.tight_layout()
    try:
        figure.savefig(args.out, dpi=100)
    except OSError as e:
        die(f"{args.out}: cannot write ({e.strerror})")
    print(f"wrote {args.out}", file=sys.stderr)

