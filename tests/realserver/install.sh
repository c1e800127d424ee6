#!/usr/bin/env bash
# Build llama.cpp's `llama-server` for the real-server tests, once per machine.
#
# Why this way: Debian has no llama.cpp package and no PyPI package ships a Linux llama-server binary, but
# the llama-cpp-python sdist vendors the llama.cpp source, so we build from it. Every option below keeps the
# build offline (no web-UI download, no npm, no curl/openssl). The binary lives in a per-user cache outside
# the repository, keyed by the pinned version; a second run is free.
#
# Usage: tests/realserver/install.sh        (last line of output: the binary path)
# Env:   SPECBENCH_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/specbench)
#        PYTHON           interpreter whose pip downloads the sdist (default: repo .venv, else python3)
set -euo pipefail

VERSION=0.3.36
CACHE_ROOT="${SPECBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specbench}"
DEST_DIR="$CACHE_ROOT/llama-server-$VERSION"
BIN="$DEST_DIR/llama-server"

if [[ -x "$BIN" ]]; then
    echo "$BIN"
    exit 0
fi

log() { echo "[install.sh] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then PYTHON="$REPO_ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

# Toolchain: only what the machine image has. Ninja if present, else Unix Makefiles.
which cmake >/dev/null 2>&1 || die "cmake not found (Debian: apt-get install cmake)"
which g++ >/dev/null 2>&1 || which c++ >/dev/null 2>&1 || die "no C++ compiler (Debian: apt-get install g++)"
which tar >/dev/null 2>&1 || die "tar not found"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "$PYTHON has no pip; set PYTHON to an interpreter with pip"
if which ninja >/dev/null 2>&1; then
    GENERATOR=Ninja
elif which make >/dev/null 2>&1; then
    GENERATOR="Unix Makefiles"
else
    die "neither ninja nor make found"
fi
LAUNCHER_ARGS=()
if which ccache >/dev/null 2>&1; then
    LAUNCHER_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    log "using ccache"
fi

mkdir -p "$CACHE_ROOT"
# Serialise concurrent installs (e.g. two test sessions) so they do not build twice into the same place.
if which flock >/dev/null 2>&1; then
    exec 9>"$CACHE_ROOT/.llama-server-$VERSION.lock"
    flock 9
    if [[ -x "$BIN" ]]; then
        echo "$BIN"
        exit 0
    fi
    # Holding the lock, no other build runs: leftovers are from a killed run.
    rm -rf "$CACHE_ROOT/.build-$VERSION-"* "$DEST_DIR"/.llama-server.*
fi

WORK="$(mktemp -d "$CACHE_ROOT/.build-$VERSION-XXXXXX")"
TMP_BIN=""
cleanup() { rm -rf "$WORK"; [[ -z "$TMP_BIN" ]] || rm -f "$TMP_BIN"; }
trap cleanup EXIT
START=$SECONDS

log "downloading llama-cpp-python==$VERSION sdist"
"$PYTHON" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK/dl"
SDIST="$WORK/dl/llama_cpp_python-$VERSION.tar.gz"
[[ -f "$SDIST" ]] || die "sdist not found at $SDIST"
tar xzf "$SDIST" -C "$WORK/dl" --wildcards "llama_cpp_python-$VERSION/vendor/llama.cpp/*"
rm -f "$SDIST"
SRC="$WORK/dl/llama_cpp_python-$VERSION/vendor/llama.cpp"
[[ -f "$SRC/CMakeLists.txt" ]] || die "vendored llama.cpp not found in the sdist"

log "configuring ($GENERATOR)"
cmake -S "$SRC" -B "$WORK/build" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DGGML_CCACHE=OFF "${LAUNCHER_ARGS[@]}" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >&2

log "building llama-server with -j$(nproc) under nice (5-11 min on 2 cores)"
nice -n 19 cmake --build "$WORK/build" -j"$(nproc)" --target llama-server >&2

BUILT="$WORK/build/bin/llama-server"
[[ -x "$BUILT" ]] || die "build finished but $BUILT is missing"
"$BUILT" --version >&2 || die "built binary does not run"

# Copy next to the destination, then rename: a killed run never leaves a half-written binary at $BIN.
mkdir -p "$DEST_DIR"
TMP_BIN="$(mktemp "$DEST_DIR/.llama-server.XXXXXX")"
cp "$BUILT" "$TMP_BIN"
chmod 755 "$TMP_BIN"
mv -f "$TMP_BIN" "$BIN"
TMP_BIN=""
log "built in $((SECONDS - START)) s"
echo "$BIN"
