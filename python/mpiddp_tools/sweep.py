"""Parameter sweeps from a batch file, submitted as one Slurm job array.

usage: scripts/sweep BASE.ini BATCH.txt --out DIR [--max-parallel N] [--dry-run] [--resubmit] [-- SBATCH_OPTIONS...]

Batch file (docs/slurm.md "Parameter sweeps"): one run per line, `NAME key=value ...` with
`section.key` names of the input file; `grid PREFIX key=v1|v2 ...` expands to the
cartesian product. `#` starts a comment; blank lines are ignored. Each run writes to
DIR/NAME (its run.dir); DIR/runs.tsv lists the runs for the array tasks and for
scripts/sweep-summary; DIR/base.ini is a copy of BASE.ini, which the array tasks
read (a requeued task runs with the settings the sweep was submitted with). Both
are written atomically (a temporary file, then renamed).

A DIR that already holds a sweep (DIR/runs.tsv) is refused, unless this sweep is
the same one, byte for byte (runs.tsv and base.ini): then nothing is written or
submitted, and with --resubmit the array is submitted again, each run resuming
from its newest checkpoint (how to re-run failed or pre-empted runs, once the
first array has ended: two jobs cannot share a run.dir). DIR may not contain a
tab, newline, other control character, comma or backslash (runs.tsv and sbatch's
--output and --export could not carry them). Only the Python standard library is
used.
"""
import argparse
import itertools
import os
import re
import shlex
import subprocess
import sys

from .errors import die, note, printable, set_program
from .files import read_lines, refuse_special, write_atomically, write_bytes
from .runs import BASE, RUNS, runs_tsv

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
KEY = re.compile(r"^[a-z_]+\.[a-z_]+$")


def fail(where, message):
    die(f"{where}: {message}")


def parse_assignment(where, text):
    if "=" not in text:
        fail(where, f"'{text}' is not section.key=value")
    key, value = text.split("=", 1)
    if not KEY.match(key):
        fail(where, f"'{key}' is not a section.key name")
    if key == "run.dir":
        fail(where, "run.dir is set by the sweep (DIR/NAME)")
    if value == "" or any(c.isspace() for c in value):
        fail(where, f"value of {key} is empty or has spaces")
    if any(not c.isprintable() for c in value):
        fail(where, f"value of {key} has a control character")
    return key, value


def label(value):
    return re.sub(r"[^A-Za-z0-9.+-]", "-", value)


def expand(path):
    """Returns [(name, [(key, value), ...]), ...] in file order."""
    runs = []
    for number, raw in enumerate(read_lines(path), 1):
        where = f"{path}:{number}"
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        words = text.split()
        if words[0] == "grid":
            if len(words) < 3:
                fail(where, "grid needs a name prefix and at least one key=v1|v2")
            prefix = words[1]
            axes = [parse_assignment(where, w) for w in words[2:]]
            choices = [[(k, v) for v in value.split("|")] for k, value in axes]
            for k, value in axes:
                if "" in value.split("|"):
                    fail(where, f"a choice of {k} is empty ('{value}')")
            for combo in itertools.product(*choices):
                suffix = "_".join(f"{k.split('.')[1]}-{label(v)}" for k, v in combo)
                runs.append((f"{prefix}_{suffix}", list(combo), where))
        else:
            runs.append((words[0], [parse_assignment(where, w) for w in words[1:]], where))
    if not runs:
        die(f"{path}: no runs")
    seen = {}
    for name, _, where in runs:
        if not NAME.match(name):
            fail(where, f"run name '{name}' may only use letters, digits and . _ + -")
        if name in (RUNS, BASE):
            fail(where, f"run name '{name}' is the name of a file of the sweep in DIR")
        if name in seen:
            fail(where, f"run name '{name}' repeats {seen[name]}")
        seen[name] = where
    return [(name, overrides) for name, overrides, _ in runs]


def check_out(out):
    """The sweep directory's path goes into runs.tsv (tab-separated lines) and into sbatch's --output (a
    backslash turns off its %A/%a) and --export (comma-separated): refuse what they cannot carry."""
    bad = sorted({c for c in out if not c.isprintable() or c in ",\\"})
    if bad:
        shown = " and ".join({"\t": "a tab", "\n": "a newline", ",": "a comma", "\\": "a backslash"}.get(c, repr(c))
                          for c in bad)
        die(f"--out {out}: has {shown}, which runs.tsv and sbatch cannot carry; choose another directory")


def read_bytes(path):
    refuse_special(path)
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        die(f"{path}: {e.strerror}")


def existing_sweep(out, runs_text, base_text):
    """None if OUT holds no sweep; True if it holds this one (same runs.tsv and base.ini, byte for byte), with
    False for a sweep of an older scripts/sweep (runs.tsv alone, the same); refuses any other."""
    runs = read_bytes(os.path.join(out, RUNS))
    if runs is None:
        return None
    base = read_bytes(os.path.join(out, BASE))
    if runs != runs_text:
        die(f"{out} already holds another sweep ({RUNS} differs); give a new --out, or remove {out}/{RUNS} "
            f"to replace it")
    if base is not None and base != base_text:
        die(f"{out} already holds this sweep's runs with another base file ({BASE} differs); give a new --out, "
            f"or remove {out}/{RUNS} to replace it")
    return base is not None


def main(argv=None):
    set_program("sweep")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="base input file")
    parser.add_argument("batch", help="batch file, one run per line")
    parser.add_argument("--out", required=True, help="sweep directory (run dirs, runs.tsv, base.ini)")
    parser.add_argument("--max-parallel", type=int, default=0, help="array tasks running at once (0: no limit)")
    parser.add_argument("--dry-run", action="store_true", help="print the expanded runs, submit nothing")
    parser.add_argument("--resubmit", action="store_true",
                        help="DIR holds this very sweep: submit its array again (runs resume from their checkpoints)")
    # The job script next to the command as called (scripts/sweep: scripts/mpiddp.sbatch).
    script = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "mpiddp.sbatch")
    parser.add_argument("--script", default=script)
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # after --: more sbatch options
    args = parser.parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
    if not os.path.isfile(args.base):
        die(f"{args.base}: no such input file")
    base_text = read_bytes(args.base)
    if base_text is None:
        die(f"{args.base}: no such input file")
    runs = expand(args.batch)
    out = os.path.abspath(args.out)
    check_out(out)
    rows = [(i, name, os.path.join(out, name), " ".join(f"{k}={v}" for k, v in o)) for i, (name, o) in enumerate(runs)]
    runs_text = runs_tsv(rows)
    if args.dry_run:
        for i, name, run_dir, overrides in rows:
            print(f"{i}\t{name}\t{overrides}")
        print(f"{len(rows)} run(s)")
        if os.path.lexists(os.path.join(out, RUNS)):
            same = read_bytes(os.path.join(out, RUNS)) == runs_text and \
                read_bytes(os.path.join(out, BASE)) in (None, base_text)
            note(f"{out} already holds {'this' if same else 'another'} sweep: submitting "
                 f"would {'need --resubmit' if same else 'be refused'}")
        return
    if os.path.exists(out) and not os.path.isdir(out):
        die(f"--out {out}: not a directory")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        die(f"--out {out}: cannot create ({e.strerror})")
    same = existing_sweep(out, runs_text, base_text)
    base = os.path.join(out, BASE)
    if same is None:
        # Renamed in this order: runs.tsv's presence marks a complete sweep.
        write_atomically([write_bytes(base, base_text), write_bytes(os.path.join(out, RUNS), runs_text)])
    else:
        if not same:  # written by an older scripts/sweep, without base.ini: its tasks read BASE.ini itself
            base = os.path.abspath(args.base)
        held = f"{printable(out)} already holds this sweep (same {RUNS}{' and ' + BASE if same else ''})"
        if not args.resubmit:
            print(f"sweep: {held}: nothing written or submitted; pass --resubmit to submit its array again (each "
                  f"run resumes from its newest checkpoint) once its first array has ended", file=sys.stderr)
            return
        print(f"sweep: {held}: submitting it again; each run resumes from its newest checkpoint", file=sys.stderr)
    array = f"0-{len(rows) - 1}" + (f"%{args.max_parallel}" if args.max_parallel > 0 else "")
    logs = out.replace("%", "%%")  # sbatch's file name pattern: %% is a literal %
    command = ["sbatch", f"--array={array}", f"--output={logs}/%x-%A_%a.out",
               f"--export=ALL,MPIDDP_SWEEP={out}/{RUNS}", *extra, args.script, base]
    print("+ " + " ".join(shlex.quote(c) for c in command), flush=True)
    try:
        rc = subprocess.call(command)
    except OSError as e:
        die(f"cannot run sbatch ({e.strerror}); {out}/{RUNS} is written: run the same command with --resubmit "
            f"where Slurm's sbatch is installed")
    if rc != 0 and not args.resubmit:
        note(f"sbatch exited {rc}; to submit this sweep's array again, run the same command with --resubmit")
    sys.exit(rc)

