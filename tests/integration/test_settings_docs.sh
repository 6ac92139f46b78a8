#!/usr/bin/env bash
# One settings table: the schema in src/config (printed by `mpiddp train --help`)
# is the only definition; docs/configuration.md's key table must list exactly its
# keys with exactly its defaults, so the reference cannot drift from the code.
source "$(dirname "$0")/lib.sh"

"$MPIDDP" train --help > "$WORK/help.txt" || fail "train --help exited $?"
"$PYTHON" - "$WORK/help.txt" "$MPIDDP_SOURCE_DIR/docs/configuration.md" <<'PY' && pass "docs/configuration.md lists every key of train --help with its default" || fail "settings table and schema differ"
import re, sys
help_text, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
# --section.key arg (=default)   description   (Boost.Program_options' layout)
schema = {m.group(1): (m.group(2) or "") for m in re.finditer(r"^  --([a-z_0-9]+\.[a-z_0-9]+) arg(?: \(=([^)]*)\))?", help_text, re.M)}
assert len(schema) > 40, f"only {len(schema)} keys in train --help"
def plain(text):
    text = text.strip().strip("`")
    return "" if text in ("empty", "(empty)", "(required)") else text
documented = {}
for row in re.finditer(r"^\| (`[a-z_0-9]+\.[a-z_0-9]+`(?:, `[a-z_0-9]+\.[a-z_0-9]+`)*) \| ([^|]*) \|", doc, re.M):
    keys = [k.strip("` ") for k in row.group(1).split(",")]
    defaults = [d.strip() for d in row.group(2).split(",")] if len(keys) > 1 else [row.group(2)]
    assert len(defaults) == len(keys), (keys, defaults)
    for key, default in zip(keys, defaults):
        documented[key] = plain(default)
problems = []
for key in sorted(set(schema) | set(documented)):
    if key not in documented:
        problems.append(f"{key}: in train --help, not in docs/configuration.md")
    elif key not in schema:
        problems.append(f"{key}: in docs/configuration.md, not in train --help")
    else:
        a, b = schema[key], documented[key]
        same = a == b
        try:
            same = same or float(a) == float(b)
        except ValueError:
            pass
        if not same:
            problems.append(f"{key}: default '{a}' in train --help, '{b}' in docs/configuration.md")
for p in problems:
    print(p, file=sys.stderr)
print(f"{len(schema)} keys compared")
sys.exit(1 if problems else 0)
PY
finish
