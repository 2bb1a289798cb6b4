# shellcheck shell=bash
# Helpers shared by kafka-tools.sh, python-env.sh and apache-kafka.sh.
# Sourced, not run. Everything these scripts print for a person goes to
# stderr; stdout is kept for the one result line a caller may capture.

OTTLA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OTTLA_CACHE=${OTTLA_CACHE:-$OTTLA_ROOT/.cache}
mkdir -p "$OTTLA_CACHE"
OTTLA_CACHE=$(cd "$OTTLA_CACHE" && pwd)
export OTTLA_CACHE

ottla_log() { printf '%s\n' "$*" >&2; }
ottla_die() {
  printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2
  exit 1
}

# Installs Debian packages; only ever reached on a machine that lacks them.
ottla_apt_install() {
  command -v apt-get >/dev/null 2>&1 || ottla_die "need the packages $*, and there is no apt-get to install them"
  [ "$(id -u)" = 0 ] || ottla_die "need the packages $*: run as root or install them first"
  ottla_log "installing Debian packages: $*"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# Holds an exclusive lock on FILE (fd 9) until the calling script exits, so
# that concurrent callers (parallel tests) don't build the same thing twice.
ottla_lock() {
  command -v flock >/dev/null 2>&1 || ottla_apt_install util-linux
  exec 9>"$1"
  flock 9
}

# Java the Kafka jars run on: $JAVA_HOME/bin/java if JAVA_HOME is set, else
# java from PATH (installed with apt when missing). Kafka 4.x needs 17+.
ottla_java() {
  local java major
  if [ -n "${JAVA_HOME:-}" ]; then
    java=$JAVA_HOME/bin/java
    [ -x "$java" ] || ottla_die "JAVA_HOME=$JAVA_HOME has no bin/java"
  else
    if ! command -v java >/dev/null 2>&1; then
      ottla_apt_install openjdk-17-jre-headless
    fi
    java=java
  fi
  major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  if [ -z "$major" ] || [ "$major" -lt 17 ]; then
    ottla_die "Apache Kafka 4.x needs Java 17 or newer; '$java' is ${major:-unknown}. Set JAVA_HOME."
  fi
  printf '%s\n' "$java"
}

# Writes stdin to FILE only when the content differs, by atomic rename, so a
# script that another process is running at that moment is never half-written.
ottla_write_if_changed() {
  local file=$1 mode=${2:-644} tmp
  tmp=$(mktemp "$file.XXXXXX")
  cat >"$tmp"
  chmod "$mode" "$tmp"
  if [ -f "$file" ] && cmp -s "$tmp" "$file" && [ "$(stat -c %a "$file")" = "$mode" ]; then
    rm -f "$tmp"
  else
    mv -f "$tmp" "$file"
  fi
}
