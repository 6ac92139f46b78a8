# Sourced by the prepare-*.sh scripts: sets `mpiddp` to the binary to use: the
# script's 2nd argument, else $MPIDDP, else the checkout's build/mpiddp, the
# installation's bin/mpiddp, or mpiddp on PATH; exits 2 naming `script` if none.
mpiddp=${2:-${MPIDDP:-}}
if [ -z "$mpiddp" ]; then
  for candidate in "$here/../build/mpiddp" "$here/../../../bin/mpiddp" "$(command -v mpiddp || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then mpiddp=$candidate; break; fi
  done
fi
[ -n "$mpiddp" ] || { echo "$script: mpiddp binary not found (pass it as the 2nd argument)" >&2; exit 2; }
