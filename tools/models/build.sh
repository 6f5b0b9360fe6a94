#!/usr/bin/env bash
# Rebuild every course model: creates the pipeline's own venv on first use
# (rknn-toolkit2 installed --no-deps over the pins in requirements.txt),
# then runs build.py with any arguments given (e.g. --models mobilenet_v2).
# The toolkit is 2.3.2, not the newest: a model should be compiled by a toolkit
# no newer than the librknnrt that loads it, and 2.3.2 is the runtime board
# users get from Rockchip's repository.
set -euo pipefail
cd "$(dirname "$0")"
TOOLKIT_VERSION=2.3.2
if [ ! -x .venv/bin/python ] || [ requirements.txt -nt .venv/.installed ] \
        || [ "$(cat .venv/.installed 2>/dev/null)" != "rknn-toolkit2==$TOOLKIT_VERSION" ]; then
    python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r requirements.txt
    .venv/bin/pip install -q --no-deps "rknn-toolkit2==$TOOLKIT_VERSION"
    echo "rknn-toolkit2==$TOOLKIT_VERSION" > .venv/.installed
fi
exec .venv/bin/python build.py "$@"
