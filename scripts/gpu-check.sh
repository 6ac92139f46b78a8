#!/usr/bin/env bash
# The GPU check under its first name: scripts/gpu-check (python/mpiddp_tools/gpu_check.py) does it all;
# scripts/gpu-check --help says what it checks.
#   usage: scripts/gpu-check.sh [OUTDIR]
exec python3 "$(dirname "$0")/gpu-check" "$@"
