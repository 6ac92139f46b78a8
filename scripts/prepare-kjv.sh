#!/usr/bin/env bash
# Writes the King James Bible (Debian's bible-kjv + bible-kjv-text) as byte-token
# shards for sequence models: its text, split by bytes, the first 90% into
#   DIR/train (2 shards) and the last 10% into DIR/test (1 shard),
# every byte one token (vocabulary 256). inputs/kjv_gpt.ini reads data/kjv.
# usage: scripts/prepare-kjv.sh DIR [MPIDDP_BINARY]
set -euo pipefail
dir=${1:?usage: prepare-kjv.sh DIR [MPIDDP_BINARY]}
here=$(cd "$(dirname "$0")" && pwd)
script=prepare-kjv.sh
# shellcheck source=scripts/find-mpiddp.sh
source "$here/find-mpiddp.sh"
command -v bible > /dev/null || { echo "prepare-kjv.sh: no 'bible' program (apt-get install bible-kjv bible-kjv-text)" >&2; exit 2; }
mkdir -p "$dir"
text="$dir/kjv.txt"
if [ ! -s "$text" ]; then
  bible "Gen1:1-Rev22:21" > "$text.tmp" < /dev/null
  mv "$text.tmp" "$text"
fi
size=$(stat -c %s "$text")
[ "$size" -gt 1000000 ] || { echo "prepare-kjv.sh: $text holds $size bytes, expected about 4.3 MB" >&2; exit 2; }
train_bytes=$((size * 9 / 10))
head -c "$train_bytes" "$text" > "$dir/train.txt"
tail -c "+$((train_bytes + 1))" "$text" > "$dir/test.txt"
# mpiddp shard refuses a directory that is not empty: a part already converted is kept.
convert() {  # convert PART SHARDS
  if [ -n "$(ls -A "$dir/$1" 2>/dev/null)" ]; then echo "$dir/$1 already holds shards: kept (remove it to convert again)"; return; fi
  "$mpiddp" shard --format bytes --input "$dir/$1.txt" --out "$dir/$1" --shards "$2"
}
convert train 2
convert test 1
