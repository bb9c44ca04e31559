#!/usr/bin/env bash
# Build (once) and install the pinned llama-cpp-python wheel into the current Python.
#
# Why a script: on x86-64 a native llama.cpp build emits AMX instructions when the CPU
# advertises AMX, and VMs that hide AMX then die with SIGILL on the first prompt. We build
# with -mno-amx-int8 there. pip's own wheel cache ignores CMAKE_ARGS, so a wheel built
# with other flags could come back from it; we build with --no-cache-dir into a cache
# folder of our own keyed by version + flags, and reuse only that.
set -euo pipefail
PY=${PYTHON:-python}
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
if [ -z "${CMAKE_ARGS:-}" ]; then
  case "$(uname -m)" in
    x86_64|amd64) CMAKE_ARGS="-DCMAKE_C_FLAGS=-mno-amx-int8 -DCMAKE_CXX_FLAGS=-mno-amx-int8" ;;
    *) CMAKE_ARGS="" ;;
  esac
fi
export CMAKE_ARGS
pyver=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
key=$(printf '%s|%s|%s|%s' "$VERSION" "$CMAKE_ARGS" "$pyver" "$(uname -m)" | sha256sum | cut -c1-16)
dir="${LLMCHAT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmchat/wheels}/llama-cpp-python-$VERSION-$key"
if ! ls "$dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION (CMAKE_ARGS='$CMAKE_ARGS'); about 8 minutes on 2 cores" >&2
  tmp="$dir.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  "$PY" -m pip wheel --no-cache-dir --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$VERSION" -w "$tmp" >&2
  rm -rf "$dir"; mv "$tmp" "$dir"
fi
"$PY" -m pip install --no-deps --force-reinstall "$dir"/llama_cpp_python-*.whl >&2
echo "$dir"
