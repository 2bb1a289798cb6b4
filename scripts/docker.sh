#!/usr/bin/env bash
# Runs the two three-node Ottla clusters of docker-compose.yml (`source` and
# `destination`) in Docker, on a machine that may have no registry access.
#
#   scripts/docker.sh engine        install (Debian's docker.io) and start the Docker engine
#   scripts/docker.sh build         build the release binaries and the ottla:local image
#   scripts/docker.sh up [--metrics]    build if needed, start both clusters, wait until healthy
#   scripts/docker.sh status        containers, health, and a probe of every host port
#   scripts/docker.sh down [--volumes]  stop and remove the containers (and the data volumes)
#   scripts/docker.sh config        validate docker-compose.yml (offline, no engine needed)
#   scripts/docker.sh engine-stop   stop a dockerd that this script started
#
# The image is `FROM scratch`: `build` compiles `ottla` and `ottla-probe` on
# the host (cargo build --release), copies them with the exact shared
# libraries `ldd` lists and the dynamic loader into target/docker/context,
# and builds docker/Dockerfile there. Nothing is pulled. Linux hosts only
# (the binaries are the host's).
#
# Engine: when `dockerd` is missing, Debian's docker.io is installed with
# apt-get (and docker-compose, Compose v1.29, when neither `docker compose`
# nor `docker-compose` exists). When no engine answers, systemd's docker
# unit is started if systemd runs, else `dockerd` by hand, detached, logging
# to .cache/docker/dockerd.log. If it does not come up with its defaults
# (overlay2, iptables), it is retried once with the options a restricted
# sandbox may need: --storage-driver=vfs (no overlay mounts) --iptables=false
# --ip6tables=false (no netfilter; containers still share compose's bridge
# network, but published ports then go through docker-proxy only).
# OTTLA_DOCKERD_OPTS, when set, replaces both attempts.
#
# Environment:
#   OTTLA_IMAGE         image tag (default ottla:local; docker-compose.yml reads it too)
#   OTTLA_DOCKER_CARGO  0: don't run cargo in `build`, use the binaries already
#                       in $OTTLA_TARGET_DIR (the test suite does this)
#   OTTLA_TARGET_DIR    where the release binaries are (default <repo>/target/release)
#   COMPOSE_PROJECT_NAME  compose project (default: ottla)
#   OTTLA_DOCKERD_OPTS  dockerd options (see above)
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

export OTTLA_IMAGE=${OTTLA_IMAGE:-ottla:local}
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-ottla}
TARGET_DIR=${OTTLA_TARGET_DIR:-$OTTLA_ROOT/target/release}
STATE=$OTTLA_CACHE/docker
COMPOSE_FILE=$OTTLA_ROOT/docker-compose.yml
# Every Ottla service, and the host port of its EXTERNAL listener.
NODES="source-1:19092 source-2:19093 source-3:19094 destination-1:29092 destination-2:29093 destination-3:29094"
RESTRICTED_OPTS="--storage-driver=vfs --iptables=false --ip6tables=false"

usage() {
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---- the engine -------------------------------------------------------------

engine_answers() { docker info >/dev/null 2>&1; }

# Runs "$@" holding $STATE/install.lock, so that parallel callers (tests)
# neither run apt-get at once nor start two engines.
locked() {
  mkdir -p "$STATE"
  (
    flock 8
    "$@"
  ) 8>"$STATE/install.lock"
}

install_engine() {
  if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    ottla_apt_install docker.io
  fi
}

install_compose() {
  command -v docker-compose >/dev/null 2>&1 || ottla_apt_install docker-compose
}

# `docker compose` (v2 plugin) when it works, else `docker-compose` (v1.29,
# Debian's), installed when neither exists. Sets COMPOSE (an array).
find_compose() {
  if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  else
    command -v docker-compose >/dev/null 2>&1 || locked install_compose
    COMPOSE=(docker-compose)
  fi
  COMPOSE+=(--project-directory "$OTTLA_ROOT" -f "$COMPOSE_FILE")
}

# Starts dockerd detached (setsid, no inherited descriptors, not the lock) with options $1;
# waits up to 40 s for it to answer. Returns 1, leaving its log, if it doesn't.
start_dockerd() {
  local opts=$1 pid
  mkdir -p "$STATE"
  ottla_log "starting dockerd ${opts:-(default options)}; log: $STATE/dockerd.log"
  # shellcheck disable=SC2086
  setsid dockerd $opts </dev/null >"$STATE/dockerd.log" 2>&1 8>&- &
  pid=$!
  echo "$pid" >"$STATE/dockerd.pid"
  for _ in $(seq 80); do
    engine_answers && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      ottla_log "dockerd exited; the end of its log:"
      tail -n 15 "$STATE/dockerd.log" >&2
      rm -f "$STATE/dockerd.pid"
      return 1
    fi
    sleep 0.5
  done
  ottla_log "dockerd did not answer within 40 s; stopping it. The end of its log:"
  tail -n 15 "$STATE/dockerd.log" >&2
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$STATE/dockerd.pid"
  return 1
}

ensure_engine() {
  engine_answers && return 0
  if [ -S /var/run/docker.sock ] && docker info 2>&1 | grep -qi 'permission denied'; then
    ottla_die "the Docker engine runs but this user may not use it (add it to the docker group)"
  fi
  command -v flock >/dev/null 2>&1 || ottla_apt_install util-linux
  locked start_engine
}

start_engine() {
  engine_answers && return 0
  install_engine
  engine_answers && return 0
  [ "$(id -u)" = 0 ] || ottla_die "no Docker engine answers, and only root can start one here"
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    ottla_log "starting the docker service (systemd)"
    systemctl start docker && engine_answers && return 0
    ottla_log "systemctl start docker did not give a working engine; starting dockerd by hand"
  fi
  if [ -n "${OTTLA_DOCKERD_OPTS+set}" ]; then
    start_dockerd "$OTTLA_DOCKERD_OPTS" && return 0
  else
    start_dockerd "" && return 0
    ottla_log "retrying with the options for a restricted sandbox"
    start_dockerd "$RESTRICTED_OPTS" && return 0
  fi
  ottla_die "could not start the Docker engine (log: $STATE/dockerd.log)"
}

# Stops the dockerd this script started (by its recorded pid), if any.
engine_stop() {
  local pid
  [ -f "$STATE/dockerd.pid" ] || { ottla_log "no dockerd started by this script"; return 0; }
  pid=$(cat "$STATE/dockerd.pid")
  if kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/comm" 2>/dev/null; then
    ottla_log "stopping dockerd (pid $pid)"
    kill "$pid"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  rm -f "$STATE/dockerd.pid"
}

# ---- the image --------------------------------------------------------------

# Copies FILE into ROOTFS at the same path, following symlinks.
copy_into() {
  local file=$1 rootfs=$2
  mkdir -p "$rootfs$(dirname "$file")"
  cp -L "$file" "$rootfs$file"
}

# Every library and the loader that `ldd BINARY` lists, as absolute paths.
libraries_of() {
  ldd "$1" | awk '
    $2 == "=>" && $3 ~ /^\// { print $3; next }
    $1 ~ /^\// { print $1 }'
  ldd "$1" | grep -q 'not found' && ottla_die "ldd $1 reports a missing library"
  return 0
}

build_image() {
  local ctx=$OTTLA_ROOT/target/docker/context rootfs bin lib
  command -v ldd >/dev/null 2>&1 || ottla_die "ldd is needed to assemble the image (Linux hosts only)"
  if [ "${OTTLA_DOCKER_CARGO:-1}" != 0 ]; then
    ottla_log "building the release binaries"
    (cd "$OTTLA_ROOT" &&
      cargo build --release -p ottla-broker --bin ottla &&
      cargo build --release -p ottla-tests --bin ottla-probe) >&2
  fi
  for bin in ottla ottla-probe; do
    [ -x "$TARGET_DIR/$bin" ] || ottla_die "$TARGET_DIR/$bin is missing (cargo build --release)"
  done
  ensure_engine

  rm -rf "$ctx"
  rootfs=$ctx/rootfs
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ottla" "$rootfs/tmp" "$ctx/data"
  chmod 1777 "$rootfs/tmp"
  for bin in ottla ottla-probe; do
    # Debug info is most of the release binary's size; the image needs none.
    objcopy --strip-debug "$TARGET_DIR/$bin" "$rootfs/usr/local/bin/$bin" 2>/dev/null ||
      cp "$TARGET_DIR/$bin" "$rootfs/usr/local/bin/$bin"
    for lib in $(libraries_of "$TARGET_DIR/$bin"); do
      [ -e "$rootfs$lib" ] || copy_into "$lib" "$rootfs"
    done
  done
  printf 'root:x:0:0:root:/:/nonexistent\nottla:x:65532:65532:ottla:/var/lib/ottla:/nonexistent\n' \
    >"$rootfs/etc/passwd"
  printf 'root:x:0:\nottla:x:65532:\n' >"$rootfs/etc/group"
  # glibc resolves compose service names through /etc/hosts and DNS (both
  # built into libc.so.6 since glibc 2.34; Docker mounts hosts and resolv.conf).
  printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
  cp "$OTTLA_ROOT/docker/server.properties" "$rootfs/etc/ottla/server.properties"
  cp "$OTTLA_ROOT/docker/Dockerfile" "$ctx/Dockerfile"

  ottla_log "building $OTTLA_IMAGE from $ctx ($(du -sh "$ctx" | cut -f1))"
  # The classic builder needs nothing beyond the engine (no buildx plugin).
  DOCKER_BUILDKIT=0 docker build --quiet -t "$OTTLA_IMAGE" \
    --label "org.opencontainers.image.source=ottla" \
    --label "org.opencontainers.image.revision=$(git -C "$OTTLA_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)" \
    "$ctx" >&2
  ottla_log "built $OTTLA_IMAGE"
}

# ---- the clusters -----------------------------------------------------------

# Health of one service's container: healthy, unhealthy, starting, or missing.
health_of() {
  local id
  id=$("${COMPOSE[@]}" ps -q "$1" 2>/dev/null || true)
  [ -n "$id" ] || { echo missing; return; }
  docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id" 2>/dev/null || echo missing
}

wait_healthy() {
  local deadline=$(( $(date +%s) + ${OTTLA_DOCKER_WAIT:-120} )) node service pending
  while :; do
    pending=""
    for node in $NODES; do
      service=${node%%:*}
      [ "$(health_of "$service")" = healthy ] || pending="$pending $service"
    done
    [ -z "$pending" ] && { ottla_log "all six nodes are healthy"; return 0; }
    if [ "$(date +%s)" -ge "$deadline" ]; then
      for node in $NODES; do
        service=${node%%:*}
        ottla_log "$service: $(health_of "$service")"
      done
      ottla_log "not healthy:$pending; their last log lines:"
      for service in $pending; do
        "${COMPOSE[@]}" logs --no-color --tail 20 "$service" >&2 || true
      done
      return 1
    fi
    sleep 2
  done
}

up() {
  local profiles=() services=()
  for arg in "$@"; do
    case $arg in
      --metrics) profiles=(--profile metrics) ;;
      *) usage ;;
    esac
  done
  ensure_engine
  find_compose
  if ! docker image inspect "$OTTLA_IMAGE" >/dev/null 2>&1; then
    build_image
  fi
  for node in $NODES; do services+=("${node%%:*}"); done
  [ ${#profiles[@]} -gt 0 ] && services+=(metrics)
  # `--profile` goes before the subcommand (Compose v1 and v2 alike).
  "${COMPOSE[@]}" "${profiles[@]}" up -d --no-build "${services[@]}" >&2
  wait_healthy
  status
}

status() {
  local node service port
  ensure_engine
  find_compose
  "${COMPOSE[@]}" --profile metrics ps >&2
  for node in $NODES; do
    service=${node%%:*}
    port=${node##*:}
    printf '%-14s %-10s ' "$service" "$(health_of "$service")" >&2
    if [ -x "$TARGET_DIR/ottla-probe" ]; then
      "$TARGET_DIR/ottla-probe" "localhost:$port" --brokers 1 --timeout 3 >&2 || true
    else
      echo "localhost:$port" >&2
    fi
  done
}

down() {
  local args=(--remove-orphans)
  for arg in "$@"; do
    case $arg in
      --volumes | -v) args+=(--volumes) ;;
      *) usage ;;
    esac
  done
  ensure_engine
  find_compose
  "${COMPOSE[@]}" --profile metrics down "${args[@]}" >&2
}

config() {
  find_compose
  "${COMPOSE[@]}" --profile metrics config -q
  ottla_log "docker-compose.yml is valid ($("${COMPOSE[@]}" version --short 2>/dev/null || echo compose))"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  engine) ensure_engine; docker version --format 'engine {{.Server.Version}}' >&2 ;;
  engine-stop) engine_stop ;;
  build) build_image ;;
  up) up "$@" ;;
  status) status ;;
  down) down "$@" ;;
  config) config ;;
  *) usage ;;
esac
