# Shared settings for the dev/ scripts: tool versions, cache and run directories.
# Sourced, never executed. Every path can be overridden from the environment.

TEMPORAL_CLI_VERSION=v1.5.1
KUBERNETES_VERSION=v1.36.3
ETCD_VERSION=v3.6.14
KWOK_VERSION=v0.8.0

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODEWRIGHT_CACHE=${NODEWRIGHT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodewright}
TOOLS_DIR=$NODEWRIGHT_CACHE/tools
NODEWRIGHT_RUN_DIR=${NODEWRIGHT_RUN_DIR:-$REPO_ROOT/.run}

TEMPORAL_HOME=$TOOLS_DIR/temporal-$TEMPORAL_CLI_VERSION
KUBERNETES_HOME=$TOOLS_DIR/kubernetes-$KUBERNETES_VERSION
ETCD_HOME=$TOOLS_DIR/etcd-$ETCD_VERSION
KWOK_HOME=$TOOLS_DIR/kwok-$KWOK_VERSION

die() { echo "error: $*" >&2; exit 1; }
log() { echo "==> $*" >&2; }
