#!/usr/bin/env bash
# Fetches Apache Kafka's jars (broker and command-line tools) from Maven
# Central into $OTTLA_CACHE/kafka-<version>/libs and writes Kafka-style
# wrapper scripts into $OTTLA_CACHE/kafka-<version>/bin.
#
# The last line of stdout is that bin directory:
#   BIN=$(scripts/kafka-tools.sh | tail -1)
#   "$BIN/kafka-topics.sh" --bootstrap-server 127.0.0.1:9092 --list
#
# With --class-archive, the last line is instead a class-data-sharing
# archive of the classes the tools load, made once per Java build, for runs
# that start many short-lived tools (the test suite):
#   KAFKA_JVM_PERFORMANCE_OPTS="-XX:SharedArchiveFile=$(scripts/kafka-tools.sh --class-archive | tail -1) ..."
#
# Idempotent; when everything is in place it runs no Maven and no JVM and
# takes milliseconds. Safe to call from parallel tests (a lock serialises
# the fetch; every file is written by atomic rename).
#
# Environment:
#   OTTLA_CACHE          cache root (default <repo>/.cache)
#   OTTLA_KAFKA_VERSION  Kafka version (default below; "latest" = newest 4.x
#                        that Maven Central lists, looked up on every call)
#   OTTLA_M2_REPO        Maven local repository (default $OTTLA_CACHE/m2)
#
# The wrappers honour KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS,
# KAFKA_LOG4J_OPTS, KAFKA_OPTS and JAVA_HOME as Kafka's own scripts do.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

# Newest Apache Kafka release on Maven Central when this was written.
DEFAULT_KAFKA_VERSION=4.4.0
# The log4j-core version that Kafka 4.4.0 depends on (kafka-server's pom).
# Kafka's jars log through slf4j 1.7; log4j-slf4j-impl binds that to log4j2
# and must be the same version as log4j-core, so all three are pinned here
# (for another OTTLA_KAFKA_VERSION this overrides its log4j 2.x version).
LOG4J_VERSION=2.25.5
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
# Bump when the layout of libs/ changes, to force a new download.
LIBS_FORMAT=1

M2_REPO=${OTTLA_M2_REPO:-$OTTLA_CACHE/m2}

need_maven() {
  command -v mvn >/dev/null 2>&1 || ottla_apt_install maven
}

mvn_q() {
  # All Maven output goes to stderr: stdout is reserved for the result.
  # Debian's Maven 3.8 prints stray colour resets even in batch mode; strip
  # them (pipefail keeps Maven's exit status).
  mvn -B -q -ntp -Dstyle.color=never -Dmaven.repo.local="$M2_REPO" "$@" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2
}

resolve_latest() {
  local work=$OTTLA_CACHE/.kafka-latest.tmp
  need_maven
  rm -rf "$work" && mkdir -p "$work"
  cat >"$work/pom.xml" <<'EOF'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.ottla</groupId><artifactId>kafka-latest</artifactId><version>0</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId>
      <version>[4.0.0,5.0.0)</version>
    </dependency>
  </dependencies>
</project>
EOF
  mvn_q -f "$work/pom.xml" "$DEPENDENCY_PLUGIN:list" -DincludeArtifactIds=kafka-clients \
    -DoutputFile="$work/list.txt"
  sed -n 's/.*org\.apache\.kafka:kafka-clients:jar:\([^:]*\):.*/\1/p' "$work/list.txt" | head -1
  rm -rf "$work"
}

VERSION=${OTTLA_KAFKA_VERSION:-$DEFAULT_KAFKA_VERSION}
if [ "$VERSION" = latest ]; then
  VERSION=$(resolve_latest)
  [ -n "$VERSION" ] || ottla_die "could not find the newest Kafka 4.x on Maven Central"
fi
KDIR=$OTTLA_CACHE/kafka-$VERSION

# script name | main class | default heap ("" = the 256m tools default)
#   | "required" or "optional" (a Kafka release without it just gets no
#   wrapper). Where a class moved between releases, list the names separated
#   by commas, newest first: the first one present in the jars is used.
TOOLS=(
  "kafka-topics.sh|org.apache.kafka.tools.TopicCommand||required"
  "kafka-configs.sh|org.apache.kafka.tools.ConfigCommand,kafka.admin.ConfigCommand||required"
  "kafka-console-producer.sh|org.apache.kafka.tools.ConsoleProducer|-Xmx512m|required"
  "kafka-console-consumer.sh|org.apache.kafka.tools.consumer.ConsoleConsumer|-Xmx512m|required"
  "kafka-console-share-consumer.sh|org.apache.kafka.tools.consumer.ConsoleShareConsumer|-Xmx512m|optional"
  "kafka-consumer-groups.sh|org.apache.kafka.tools.consumer.group.ConsumerGroupCommand||required"
  "kafka-share-groups.sh|org.apache.kafka.tools.consumer.group.ShareGroupCommand||optional"
  "kafka-streams-groups.sh|org.apache.kafka.tools.streams.StreamsGroupCommand||optional"
  "kafka-groups.sh|org.apache.kafka.tools.GroupsCommand||optional"
  "kafka-get-offsets.sh|org.apache.kafka.tools.GetOffsetShell||required"
  "kafka-delete-records.sh|org.apache.kafka.tools.DeleteRecordsCommand||required"
  "kafka-log-dirs.sh|org.apache.kafka.tools.LogDirsCommand||required"
  "kafka-broker-api-versions.sh|org.apache.kafka.tools.BrokerApiVersionsCommand||required"
  "kafka-producer-perf-test.sh|org.apache.kafka.tools.ProducerPerformance|-Xmx512m|required"
  "kafka-consumer-perf-test.sh|org.apache.kafka.tools.ConsumerPerformance|-Xmx512m|required"
  "kafka-share-consumer-perf-test.sh|org.apache.kafka.tools.ShareConsumerPerformance|-Xmx512m|optional"
  "kafka-e2e-latency.sh|org.apache.kafka.tools.EndToEndLatency||optional"
  "kafka-verifiable-producer.sh|org.apache.kafka.tools.VerifiableProducer|-Xmx512m|optional"
  "kafka-verifiable-consumer.sh|org.apache.kafka.tools.VerifiableConsumer|-Xmx512m|optional"
  "kafka-acls.sh|org.apache.kafka.tools.AclCommand,kafka.admin.AclCommand||required"
  "kafka-transactions.sh|org.apache.kafka.tools.TransactionsCommand||required"
  "kafka-metadata-quorum.sh|org.apache.kafka.tools.MetadataQuorumCommand||required"
  "kafka-leader-election.sh|org.apache.kafka.tools.LeaderElectionCommand||required"
  "kafka-reassign-partitions.sh|org.apache.kafka.tools.reassign.ReassignPartitionsCommand||required"
  "kafka-features.sh|org.apache.kafka.tools.FeatureCommand||required"
  "kafka-cluster.sh|org.apache.kafka.tools.ClusterTool||optional"
  "kafka-client-metrics.sh|org.apache.kafka.tools.ClientMetricsCommand||optional"
  "kafka-delegation-tokens.sh|org.apache.kafka.tools.DelegationTokenCommand||optional"
  "kafka-dump-log.sh|org.apache.kafka.tools.DumpLogSegments,kafka.tools.DumpLogSegments||required"
  "kafka-storage.sh|kafka.tools.StorageTool||required"
  "kafka-server-start.sh|kafka.Kafka|server|required"
)

ARTIFACTS=(
  "org.apache.kafka:kafka_2.13:$VERSION"
  "org.apache.kafka:kafka-tools:$VERSION"
  "org.apache.kafka:kafka-clients:$VERSION"
  "org.apache.kafka:kafka-server:$VERSION"
  "org.apache.kafka:kafka-server-common:$VERSION"
  "org.apache.kafka:kafka-storage:$VERSION"
  "org.apache.kafka:kafka-metadata:$VERSION"
  "org.apache.kafka:kafka-raft:$VERSION"
  "org.apache.kafka:kafka-group-coordinator:$VERSION"
  "org.apache.kafka:kafka-transaction-coordinator:$VERSION"
  "org.apache.kafka:kafka-share-coordinator:$VERSION"
  "org.apache.kafka:kafka-tools-api:$VERSION"
  # Kafka Streams: kafka-streams-groups.sh's tests run a Streams application.
  "org.apache.kafka:kafka-streams:$VERSION"
  # slf4j 1.7 -> log4j2 binding; see LOG4J_VERSION.
  "org.apache.logging.log4j:log4j-api:$LOG4J_VERSION"
  "org.apache.logging.log4j:log4j-core:$LOG4J_VERSION"
  "org.apache.logging.log4j:log4j-slf4j-impl:$LOG4J_VERSION"
)

# What libs/ and tools.txt were made from; any change means a new fetch.
LIBS_SPEC="format=$LIBS_FORMAT plugin=$DEPENDENCY_PLUGIN ${ARTIFACTS[*]} tools=$(printf '%s\n' "${TOOLS[@]}" | cksum)"

write_pom() {
  local a g id v
  cat <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by scripts/kafka-tools.sh: the jars of an Apache Kafka install. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.ottla</groupId><artifactId>apache-kafka-libs</artifactId><version>0</version>
  <dependencies>
EOF
  for a in "${ARTIFACTS[@]}"; do
    IFS=: read -r g id v <<<"$a"
    printf '    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>\n' "$g" "$id" "$v"
  done
  cat <<'EOF'
  </dependencies>
</project>
EOF
}

# Picks each wrapper's main class from the jars in LIBS and writes the table
# "script|class|heap" to OUT. Fails when a required tool has none.
resolve_main_classes() {
  local libs=$1 out=$2 entry name classes heap need class found listing missing=()
  listing=$(mktemp)
  for jar in "$libs"/*.jar; do
    if command -v unzip >/dev/null 2>&1; then unzip -Z1 "$jar"; else jar tf "$jar"; fi
  done >"$listing" 2>/dev/null
  : >"$out"
  for entry in "${TOOLS[@]}"; do
    IFS='|' read -r name classes heap need <<<"$entry"
    found=
    for class in ${classes//,/ }; do
      if grep -qxF "${class//.//}.class" "$listing"; then found=$class; break; fi
    done
    if [ -n "$found" ]; then
      printf '%s|%s|%s\n' "$name" "$found" "$heap" >>"$out"
    elif [ "$need" = required ]; then
      missing+=("$name ($classes)")
    else
      ottla_log "note: Kafka $VERSION has no ${classes//,/ or }: no $name"
    fi
  done
  rm -f "$listing"
  if [ ${#missing[@]} -gt 0 ]; then
    ottla_log "error: Kafka $VERSION lacks the main classes of: ${missing[*]}; update TOOLS in $0"
    return 1
  fi
}

fetch_libs() {
  local work=$OTTLA_CACHE/.kafka-$VERSION.tmp start
  need_maven
  start=$(date +%s)
  ottla_log "fetching Apache Kafka $VERSION jars from Maven Central into $KDIR/libs"
  rm -rf "$work" && mkdir -p "$work"
  write_pom >"$work/pom.xml"
  if ! mvn_q -f "$work/pom.xml" "$DEPENDENCY_PLUGIN:copy-dependencies" \
      -DincludeScope=runtime -DoutputDirectory="$work/libs"; then
    rm -rf "$work"
    ottla_die "Maven could not fetch Kafka $VERSION (is it on Maven Central?)"
  fi
  if ! resolve_main_classes "$work/libs" "$work/tools.txt"; then
    rm -rf "$work"
    exit 1
  fi
  mkdir -p "$KDIR"
  rm -rf "$KDIR/libs"
  mv "$work/libs" "$KDIR/libs"
  mv "$work/tools.txt" "$KDIR/tools.txt"
  printf '%s\n' "$LIBS_SPEC" >"$KDIR/libs.spec"
  rm -rf "$work"
  ottla_log "fetched $(find "$KDIR/libs" -name '*.jar' | wc -l) jars in $(( $(date +%s) - start ))s"
}

write_configs() {
  ottla_write_if_changed "$KDIR/config/tools-log4j2.properties" <<'EOF'
# Generated by scripts/kafka-tools.sh. Command-line tools: warnings and
# errors only, to stderr, so stdout carries just the tool's own output.
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
EOF
  ottla_write_if_changed "$KDIR/config/server-log4j2.properties" <<'EOF'
# Generated by scripts/kafka-tools.sh. The broker logs INFO to stdout;
# apache-kafka.sh sends that to <dir>/server.log.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.target = SYSTEM_OUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.request.additivity = false
logger.request.appenderRef.stdout.ref = STDOUT
EOF
}

# The single-quoted $-expressions below are meant for the wrappers.
# shellcheck disable=SC2016
write_wrappers() {
  local name class heap
  ottla_write_if_changed "$KDIR/bin/kafka-run-class.sh" 755 <<'EOF'
#!/usr/bin/env bash
# Generated by scripts/kafka-tools.sh: runs a Kafka main class on the jars
# in ../libs, like Kafka's own kafka-run-class.sh.
set -e
base_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ]; then
  echo "USAGE: $0 classname [opts]" >&2
  exit 1
fi
if [ -n "${JAVA_HOME:-}" ]; then JAVA=$JAVA_HOME/bin/java; else JAVA=java; fi
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx256m}
KAFKA_JVM_PERFORMANCE_OPTS=${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}
KAFKA_LOG4J_OPTS=${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.properties}
# Word splitting of the *_OPTS variables is intended, as in Kafka's script.
# shellcheck disable=SC2086
exec "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_LOG4J_OPTS ${KAFKA_OPTS:-} \
  -cp "$base_dir/libs/*${CLASSPATH:+:$CLASSPATH}" "$@"
EOF
  while IFS='|' read -r name class heap; do
    {
      printf '#!/usr/bin/env bash\n'
      printf '# Generated by scripts/kafka-tools.sh (Apache Kafka %s).\n' "$VERSION"
      if [ "$heap" = server ]; then
        printf '%s\n' 'if [ $# -lt 1 ]; then echo "USAGE: $0 server.properties [--override property=value]*" >&2; exit 1; fi'
        printf '%s\n' 'export KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx1g}'
        printf '%s\n' 'export KAFKA_LOG4J_OPTS=${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/config/server-log4j2.properties}'
      elif [ -n "$heap" ]; then
        printf 'export KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:-%s}\n' "$heap"
      fi
      printf 'exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" %s "$@"\n' "$class"
    } | ottla_write_if_changed "$KDIR/bin/$name" 755
  done <"$KDIR/tools.txt"
}

# The classes a tool loads to talk to a broker, written by short runs of
# the admin client, a producer and a consumer against a closed port, then
# dumped into one static archive (JDK classes included). With it a tool
# starts on about a third of the CPU. Prints the archive's path.
class_archive() {
  local java id archive work run
  java=$(ottla_java)
  id=$({ readlink -f "$(command -v "$java")"; "$java" -version 2>&1; } | cksum | cut -d' ' -f1)
  archive=$KDIR/cds/tools-$id.jsa
  if [ ! -f "$archive" ]; then
    ottla_lock "$OTTLA_CACHE/.kafka-$VERSION-cds.lock"
  fi
  if [ ! -f "$archive" ]; then
    ottla_log "making a class-data-sharing archive of the Kafka tools for $java"
    work=$(mktemp -d "$OTTLA_CACHE/.kafka-cds.XXXXXX")
    run() {
      local list=$1; shift
      KAFKA_OPTS="-XX:DumpLoadedClassList=$work/$list" "$@" >/dev/null 2>&1 || true
    }
    printf 'default.api.timeout.ms=1500\nrequest.timeout.ms=1000\n' >"$work/admin.properties"
    run admin.classes "$KDIR/bin/kafka-topics.sh" --bootstrap-server 127.0.0.1:1 --list \
      --command-config "$work/admin.properties"
    printf 'k:v\n' | run producer.classes "$KDIR/bin/kafka-console-producer.sh" \
      --bootstrap-server 127.0.0.1:1 --topic t --producer-property max.block.ms=1000
    run consumer.classes "$KDIR/bin/kafka-console-consumer.sh" --bootstrap-server 127.0.0.1:1 \
      --topic t --group g --max-messages 1 --timeout-ms 1500
    sort -u "$work"/*.classes >"$work/all.classes"
    # The class path must be the one the wrappers give, for the archive to apply.
    if ! "$java" -Xshare:dump -XX:SharedClassListFile="$work/all.classes" \
        -XX:SharedArchiveFile="$work/tools.jsa" -cp "$KDIR/libs/*" >"$work/dump.log" 2>&1; then
      tail -5 "$work/dump.log" >&2
      rm -rf "$work"
      ottla_die "could not make the class-data-sharing archive with $java"
    fi
    mkdir -p "$KDIR/cds"
    mv "$work/tools.jsa" "$archive"
    rm -rf "$work"
  fi
  printf '%s\n' "$archive"
}

libs_current() {
  [ -d "$KDIR/libs" ] && [ -f "$KDIR/tools.txt" ] &&
    [ "$(cat "$KDIR/libs.spec" 2>/dev/null)" = "$LIBS_SPEC" ]
}

if libs_current && { [ -n "${JAVA_HOME:-}" ] || command -v java >/dev/null 2>&1; }; then
  : # Fast path: no lock, no JVM. The writes below are atomic renames.
else
  ottla_lock "$OTTLA_CACHE/.kafka-$VERSION.lock"
  ottla_java >/dev/null
  libs_current || fetch_libs
fi
# The wrappers and configs depend only on this script and tools.txt: skip
# rewriting them (some 200 forks) when neither changed since the last run.
GENERATED=$(cat "${BASH_SOURCE[0]}" "$OTTLA_ROOT/scripts/_common.sh" "$KDIR/tools.txt" | cksum)
if [ "$(cat "$KDIR/bin/.generated" 2>/dev/null)" != "$GENERATED" ] ||
   [ ! -f "$KDIR/config/server-log4j2.properties" ]; then
  mkdir -p "$KDIR/bin" "$KDIR/config"
  write_configs
  write_wrappers
  printf '%s\n' "$VERSION" | ottla_write_if_changed "$KDIR/VERSION"
  printf '%s\n' "$GENERATED" | ottla_write_if_changed "$KDIR/bin/.generated"
fi
if [ "${1:-}" = --class-archive ]; then
  class_archive
else
  printf '%s\n' "$KDIR/bin"
fi
