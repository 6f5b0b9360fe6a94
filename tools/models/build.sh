#!/usr/bin/env bash
# Rebuild every course model: creates the pipeline's own venv on first use
# (rknn-toolkit2 2.5.0 installed --no-deps over the pins in requirements.txt),
# then runs build.py with any arguments given (e.g. --models mobilenet_v2).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/python ] || [ requirements.txt -nt .venv/.installed ]; then
    python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r requirements.txt
    .venv/bin/pip install -q --no-deps rknn-toolkit2==2.5.0
    touch .venv/.installed
fi
exec .venv/bin/python build.py "$@"
