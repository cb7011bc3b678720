# Shared settings for the dev/ scripts: tool versions, cache and run directories.
# Sourced, never executed. Every path can be overridden from the environment.

TEMPORAL_CLI_VERSION=v1.5.1
KUBERNETES_VERSION=v1.36.3
ETCD_VERSION=v3.6.14
KWOK_VERSION=v0.8.0
CARGO_DENY_VERSION=0.20.2
# The chart's and the monitoring rules' checkers (tests/tidy/monitoring.rs): helm v3 and promtool
# (Prometheus v3.16.0 is the Go module version v0.316.0).
HELM_VERSION=v3.22.0
PROMTOOL_VERSION=v0.316.0

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODEWRIGHT_CACHE=${NODEWRIGHT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodewright}
TOOLS_DIR=${TOOLS_DIR:-$NODEWRIGHT_CACHE/tools}
NODEWRIGHT_RUN_DIR=${NODEWRIGHT_RUN_DIR:-$REPO_ROOT/.run}

TEMPORAL_HOME=${TEMPORAL_HOME:-$TOOLS_DIR/temporal-$TEMPORAL_CLI_VERSION}
KUBERNETES_HOME=${KUBERNETES_HOME:-$TOOLS_DIR/kubernetes-$KUBERNETES_VERSION}
ETCD_HOME=${ETCD_HOME:-$TOOLS_DIR/etcd-$ETCD_VERSION}
KWOK_HOME=${KWOK_HOME:-$TOOLS_DIR/kwok-$KWOK_VERSION}
CARGO_DENY_HOME=${CARGO_DENY_HOME:-$TOOLS_DIR/cargo-deny-$CARGO_DENY_VERSION}
HELM_HOME=${HELM_HOME:-$TOOLS_DIR/helm-$HELM_VERSION}
PROMTOOL_HOME=${PROMTOOL_HOME:-$TOOLS_DIR/promtool-$PROMTOOL_VERSION}
# The RustSec advisory database cargo deny reads (dev/install fetches it, dev/test reads it
# offline), a clone in $ADVISORY_DB_HOME/$ADVISORY_DB_NAME, the directory cargo deny 0.20 uses for
# the upstream URL. NODEWRIGHT_ADVISORY_DB_SOURCE: where to fetch it from (any git URL or path).
ADVISORY_DB_HOME=${ADVISORY_DB_HOME:-$NODEWRIGHT_CACHE/advisory-dbs}
ADVISORY_DB_NAME=advisory-db-3157b0e258782691
NODEWRIGHT_ADVISORY_DB_SOURCE=${NODEWRIGHT_ADVISORY_DB_SOURCE:-https://github.com/rustsec/advisory-db}

# The official Azure SDK for Python the sandbox's SDK conformance test drives
# (sandbox/tests/python_sdk.rs): a virtual environment made by dev/install --test-tools from the
# pinned, hashed requirements; its directory carries the requirements' digest, so a change of pins
# makes a new one.
AZURE_SDK_PYTHON_REQUIREMENTS=$REPO_ROOT/sandbox/tests/sdk/requirements.txt
AZURE_SDK_PYTHON_HOME=${AZURE_SDK_PYTHON_HOME:-$TOOLS_DIR/azure-sdk-python-$(sha256sum "$AZURE_SDK_PYTHON_REQUIREMENTS" | cut -c1-12)}

RUN=$NODEWRIGHT_RUN_DIR LOGS=$NODEWRIGHT_RUN_DIR/logs PIDS=$NODEWRIGHT_RUN_DIR/pids

die() { echo "error: $*" >&2; exit 1; }
log() { echo "==> $*" >&2; }

# Processes started by the dev/ scripts: detached, logged to $LOGS/NAME.log, pid in $PIDS/NAME.pid.

# Prints the recorded pid of $1 if that process is alive and still runs the binary we started.
running_pid() {
  local pidfile=$PIDS/$1.pid pid
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ -r /proc/$pid/cmdline ]] || return 1
  # No pipeline into `grep -q` here: under pipefail its early exit can fail the check (SIGPIPE).
  local cmdline expected
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  expected=$(head -n1 "$PIDS/$1.cmd" 2>/dev/null || echo "$1")
  [[ $cmdline == *"$expected"* ]] || return 1
  echo "$pid"
}

# start NAME ARGS...: starts a detached process, records its pid and binary, logs to $LOGS/NAME.log.
start() {
  local name=$1; shift
  mkdir -p "$PIDS" "$LOGS"
  echo "$1" >"$PIDS/$name.cmd"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  local pid=$! deadline=$((SECONDS + 10)) cmdline
  echo "$pid" >"$PIDS/$name.pid"
  # Until the child has exec'd, /proc/PID/cmdline is this shell's, and running_pid would take the
  # component for gone (seen on a loaded machine: "etcd exited during start-up" while it ran).
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || break
    [[ $cmdline == *"$1"* ]] && break
    sleep 0.05
  done
}

stop() {
  local name=$1 pid
  if pid=$(running_pid "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) ignored SIGTERM for 10s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$PIDS/$name.pid" "$PIDS/$name.cmd"
}

