#!/usr/bin/env bash
# realsglang.sh: a real SGLang 0.5.23 server (from PyPI) on a CPU-only x86_64 machine, serving
# a tiny Llama model built locally (no GPU, nothing from a model hub). eagle-tui's opt-in
# real-server tests run against it; docs/real-sglang.md explains the whole thing.
#
#   realsglang.sh install                  create the venv: torch, sglang (--no-deps), its
#                                          CPU-usable deps, the sgl_kernel shim
#   realsglang.sh model [random|script] [build_tiny_model.py args...]
#                                          build a tiny model (default random)
#   realsglang.sh start [random|script|DIR] [extra sglang args...]
#                                          serve a model on 127.0.0.1:PORT in the background,
#                                          return when it is ready
#   realsglang.sh start-spec [random|script|DIR] [extra sglang args...]
#                                          the same with NGRAM speculative decoding (through
#                                          spec_overlay/; docs/real-sglang.md)
#   realsglang.sh stop                     stop the server that `start` started
#   realsglang.sh status                   is it running, what does /health say
#   realsglang.sh all [random|script]      install (if needed) + model (if needed) + start
#
# Where things go (environment variables, with defaults):
#   REALSGLANG_HOME   base directory        ${XDG_CACHE_HOME:-~/.cache}/eagle-tui/realsglang
#   REALSGLANG_VENV   the SGLang venv       $REALSGLANG_HOME/venv
#   REALSGLANG_PORT   server port           30001
#   REALSGLANG_LOG    server log            $REALSGLANG_HOME/server.log (pid in LOG.pid)
#   REALSGLANG_START_TIMEOUT  seconds to wait for readiness (300; start-spec 600)
#   PYTHON            interpreter that creates the venv (python3; tested with 3.11)
# The random model goes to $REALSGLANG_HOME/model, the script model to
# $REALSGLANG_HOME/script-model.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
HOME_DIR="${REALSGLANG_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/eagle-tui/realsglang}"
VENV="${REALSGLANG_VENV:-$HOME_DIR/venv}"
PORT="${REALSGLANG_PORT:-30001}"
LOGF="${REALSGLANG_LOG:-$HOME_DIR/server.log}"
PIDF="$LOGF.pid"

SGLANG_VERSION="0.5.23"
TORCH_VERSION="2.14.1"        # the version sglang 0.5.23 pins (a CUDA build; runs on the CPU)
TORCHVISION_VERSION="0.29.1"  # must match torch: sglang imports torchvision at start-up

log() { echo "[realsglang $(date +%H:%M:%S)] $*" >&2; }

model_dir() {  # model_dir random|script|DIR
  case "$1" in
    random) echo "$HOME_DIR/model" ;;
    script) echo "$HOME_DIR/script-model" ;;
    *) echo "$1" ;;
  esac
}

pip_install() {  # quiet pip into the venv, constrained; drops pip's noise about local indexes
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q \
      -c "$HERE/constraints-cpu.txt" "$@" 2>&1 \
    | { grep -v -e "is ignored: it is neither a file nor a directory" \
               -e "which is not installed" \
               -e "dependency resolver does not currently take into account" || true; }
  return "${PIPESTATUS[0]}"
}

cmd_install() {
  local t0=$SECONDS
  mkdir -p "$(dirname "$VENV")"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  # 1. torch first, pinned, so that no later requirement can pull in another build
  log "1/4 torch==$TORCH_VERSION torchvision==$TORCHVISION_VERSION"
  pip_install "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
  # 2. sglang without its dependency list (which pulls CUDA-only kernel packages)
  log "2/4 sglang==$SGLANG_VERSION (--no-deps)"
  pip_install --no-deps "sglang==$SGLANG_VERSION"
  # 3. the runtime deps the CPU path imports, pinned
  log "3/4 sglang's CPU-usable runtime dependencies"
  pip_install -r "$HERE/requirements-cpu.txt"
  # 4. our stand-in for the CPU build of sgl_kernel, unless a real one imports
  local site
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  if "$VENV/bin/python" -c 'import sgl_kernel' >/dev/null 2>&1 \
     && ! grep -q "eagle-tui-shim" "$site/sgl_kernel/__init__.py" 2>/dev/null; then
    log "4/4 a real sgl_kernel imports; leaving it alone"
  else
    rm -rf "$site/sgl_kernel"
    cp -r "$HERE/sgl_kernel_shim/sgl_kernel" "$site/sgl_kernel"
    log "4/4 sgl_kernel shim copied into $site"
  fi
  SGLANG_USE_CPU_ENGINE=1 "$VENV/bin/python" -c '
import sglang, torch, sgl_kernel
import sglang.srt.entrypoints.http_server  # the module launch_server runs
print("sglang", sglang.__version__, "torch", torch.__version__, "sgl_kernel", sgl_kernel.__version__)'
  log "install done in $((SECONDS - t0)) s; $VENV is $(du -sh "$VENV" | cut -f1)"
}

cmd_model() {
  local mode="random"
  case "${1:-}" in random|script) mode="$1"; shift ;; esac
  local dir; dir="$(model_dir "$mode")"
  local t0=$SECONDS
  HF_HUB_OFFLINE=1 "$VENV/bin/python" "$HERE/build_tiny_model.py" "$dir" --mode "$mode" "$@"
  log "model ($mode) in $dir, built in $((SECONDS - t0)) s"
}

http_code() {  # http_code URL: the HTTP status, 000 when nothing answers
  "$VENV/bin/python" - "$1" <<'PY'
import sys
import urllib.error
import urllib.request

try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as response:
        print(response.status)
except urllib.error.HTTPError as error:
    print(error.code)
except Exception:
    print("000")
PY
}

running_pid() {  # prints the recorded pid when that process is alive
  [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null && cat "$PIDF"
}

# NGRAM speculative decoding on the CPU: chain drafts only (the overlay's verify pass is
# exact for a chain), and more static memory (0.05 fails the check once draft state counts).
SERVER_ENV=()             # what runs the server: nothing, or `env` with the overlay
START_TIMEOUT_DEFAULT=300
SPEC_FLAGS=(--speculative-algorithm NGRAM --speculative-num-draft-tokens 4
            --speculative-ngram-max-bfs-breadth 1 --mem-fraction-static 0.3)

cmd_start_spec() {
  local which="random"
  if [ $# -gt 0 ] && [[ "$1" != -* ]]; then which="$1"; shift; fi
  # the first start on a machine compiles SGLang's n-gram corpus (C++), hence the longer wait
  START_TIMEOUT_DEFAULT=600
  SERVER_ENV=(env "PYTHONPATH=$HERE/spec_overlay${PYTHONPATH:+:$PYTHONPATH}"
              EAGLE_REALSGLANG_SPEC_OVERLAY=1)
  cmd_start "$which" "${SPEC_FLAGS[@]}" "$@"
}

cmd_start() {
  local which="random"
  if [ $# -gt 0 ] && [[ "$1" != -* ]]; then which="$1"; shift; fi
  local model; model="$(model_dir "$which")"
  [ -f "$model/config.json" ] || { log "no model in $model; run: $0 model $which"; return 1; }
  [ -x "$VENV/bin/python" ] || { log "no venv at $VENV; run: $0 install"; return 1; }
  if running_pid >/dev/null; then
    log "already running: pid $(cat "$PIDF") (stop it first: $0 stop)"; return 1
  fi
  local timeout="${REALSGLANG_START_TIMEOUT:-$START_TIMEOUT_DEFAULT}"
  mkdir -p "$(dirname "$LOGF")"
  local t0=$SECONDS
  # setsid: the server and its scheduler and detokenizer children form one process group
  # whose id is the pid recorded here, so `stop` ends exactly that group.
  SGLANG_USE_CPU_ENGINE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  setsid "${SERVER_ENV[@]}" "$VENV/bin/python" -m sglang.launch_server \
      --model-path "$model" \
      --device cpu \
      --host 127.0.0.1 --port "$PORT" \
      --attention-backend torch_native \
      --sampling-backend pytorch \
      --cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled \
      --disable-overlap-schedule \
      --sleep-on-idle \
      --dtype float32 \
      --mem-fraction-static 0.05 \
      --max-total-tokens 8192 \
      "$@" >"$LOGF" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PIDF"
  log "pid $pid serving $model on 127.0.0.1:$PORT, log $LOGF; waiting (<= ${timeout} s)"
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "the server exited during start-up; the end of its log:"
      tail -25 "$LOGF" >&2; rm -f "$PIDF"; return 1
    fi
    if grep -q "The server is fired up and ready to roll" "$LOGF" 2>/dev/null \
       && [ "$(http_code "http://127.0.0.1:$PORT/health")" = 200 ]; then
      break
    fi
    if (( SECONDS - t0 > timeout )); then
      log "not ready after ${timeout} s; stopping it"; cmd_stop; return 1
    fi
    sleep 1
  done
  log "ready on http://127.0.0.1:$PORT after $((SECONDS - t0)) s (pid $pid)"
}

cmd_stop() {
  [ -f "$PIDF" ] || { log "nothing to stop (no $PIDF)"; return 0; }
  local pid; pid="$(cat "$PIDF")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  # the scheduler and detokenizer may outlive the leader for a moment
  for _ in $(seq 1 20); do pgrep -g "$pid" >/dev/null 2>&1 || break; sleep 0.5; done
  pgrep -g "$pid" >/dev/null 2>&1 && kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$PIDF"
  log "stopped process group $pid"
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    echo "running: pid $pid, port $PORT, /health $(http_code "http://127.0.0.1:$PORT/health"), log $LOGF"
  else
    echo "not running (no live pid in $PIDF)"; return 3
  fi
}

cmd_all() {
  local mode="${1:-random}"
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sglang' 2>/dev/null || cmd_install
  [ -f "$(model_dir "$mode")/config.json" ] || cmd_model "$mode"
  cmd_start "$mode"
}

case "${1:-}" in
  install|model|start|start-spec|stop|status|all) c="${1//-/_}"; shift; "cmd_$c" "$@" ;;
  *) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2 ;;
esac
