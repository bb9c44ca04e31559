#!/usr/bin/env bash
# Drive the real llmchat TUI in tmux with the real default model:
#   start llmchat (fresh LLMCHAT_HOME), send one message, wait for the reply, quit;
#   start `llmchat --continue` and check that the screen shows the restore badge ("restored").
# Exits non-zero on failure and prints what the screen showed.
# Usage: tests/tmux_e2e.sh [path/to/llmchat]   (default: the venv's console script)
set -euo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
LLMCHAT="${1:-$HERE/.venv/bin/llmchat}"
TIMEOUT="${TMUX_E2E_TIMEOUT:-90}"
HOME_DIR="$(mktemp -d)"
SESSION="llmchat-e2e-$$"
SOCKET="llmchat-e2e-$$"
T=(tmux -L "$SOCKET")

cleanup() {
    "${T[@]}" kill-server 2>/dev/null || true
    rm -rf "$HOME_DIR"
}
trap cleanup EXIT

screen() { "${T[@]}" capture-pane -p -t "$SESSION" 2>/dev/null || true; }

fail() {
    echo "FAIL: $1" >&2
    echo "----- screen -----" >&2
    screen >&2
    echo "------------------" >&2
    exit 1
}

# wait_for REGEX WHAT: poll the pane until REGEX shows up (or TIMEOUT seconds pass)
wait_for() {
    local deadline=$((SECONDS + TIMEOUT))
    while ((SECONDS < deadline)); do
        if screen | grep -Eq -- "$1"; then
            return 0
        fi
        if ! "${T[@]}" has-session -t "$SESSION" 2>/dev/null; then
            fail "llmchat exited while waiting for: $2"
        fi
        sleep 0.5
    done
    fail "timed out after ${TIMEOUT}s waiting for: $2"
}

wait_exit() {
    local deadline=$((SECONDS + 30))
    while "${T[@]}" has-session -t "$SESSION" 2>/dev/null; do
        ((SECONDS < deadline)) || fail "llmchat did not quit on ctrl+q"
        sleep 0.3
    done
}

start() {
    # remain-on-exit off: the tmux session ends when llmchat does
    "${T[@]}" new-session -d -s "$SESSION" -x 120 -y 36 \
        "env LLMCHAT_HOME='$HOME_DIR' TERM=xterm-256color '$LLMCHAT' $*"
}

[ -x "$LLMCHAT" ] || { echo "FAIL: no llmchat executable at $LLMCHAT" >&2; exit 1; }

# 1. a fresh start: chat one message
start
wait_for "tok/s|ctx [0-9,]+/[0-9,]+" "the model to load (status line with ctx used/n_ctx)"
"${T[@]}" send-keys -t "$SESSION" -l "Name one colour."
"${T[@]}" send-keys -t "$SESSION" Enter
wait_for "tok/s" "the reply to finish (tokens/s in the status line)"
echo "--- after the first turn ---"
screen
"${T[@]}" send-keys -t "$SESSION" C-q
wait_exit

# 2. --continue: the last session is restored from snapshots, and the badge says so
start --continue
wait_for "restored [0-9,]+ tokens" "the restore badge after --continue"
screen | grep -q "Name one colour" || fail "the resumed session does not show the first message"
echo "--- after --continue ---"
screen
"${T[@]}" send-keys -t "$SESSION" C-q
wait_exit
echo "PASS: tmux end-to-end (chat, quit, --continue shows the restore badge)"
