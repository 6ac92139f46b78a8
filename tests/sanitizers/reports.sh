#!/usr/bin/env bash
# The sanitizer reports of a sanitizer build's tests, one file per process in DIR.
#   reports.sh clear DIR   before the tests: an empty DIR (the sanitizers do not create it)
#   reports.sh check DIR   after them: print every report and fail if there is any
# The reports go to files rather than to each test's output because several tests
# expect a job to fail and keep its output to themselves: a report there would
# otherwise only change an exit code that nobody looks at.
set -euo pipefail
mode=$1 dir=$2
if [ "$mode" = clear ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  exit 0
fi
shopt -s nullglob
reports=("$dir"/*)
if [ ${#reports[@]} -eq 0 ]; then
  echo "no sanitizer reports in $dir"
  exit 0
fi
for report in "${reports[@]}"; do
  echo "===== $(basename "$report") (test.program.pid) ====="
  cat "$report"
done
echo "FAIL: ${#reports[@]} sanitizer report(s) in $dir" >&2
exit 1
