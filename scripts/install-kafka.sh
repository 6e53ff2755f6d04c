#!/usr/bin/env bash
# Fetch the Kafka 4.3.1 broker (kafka_2.13, with its runtime dependencies and a
# log4j2 binding) from Maven Central into $DPMSTREAM_CACHE/kafka-4.3.1, once.
#
#   $DPMSTREAM_CACHE/kafka-4.3.1/libs/*.jar              classpath of kafka.Kafka and
#                                                       kafka.tools.StorageTool
#   $DPMSTREAM_CACHE/kafka-4.3.1/config/log4j2.properties broker logs to files only
#   $DPMSTREAM_CACHE/kafka-4.3.1/.complete               written last: the set is whole
#
# A second run with the marker present and the jars intact does nothing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
KAFKA_VERSION=4.3.1
cache=${DPMSTREAM_CACHE:-$HOME/.cache/dpmstream}
home="$cache/kafka-$KAFKA_VERSION"
marker="$home/.complete"

# Jars the broker and the storage tool cannot start without; the marker alone is
# not trusted (a cache could have been pruned by hand).
required=(
    "kafka_2.13-$KAFKA_VERSION.jar" "kafka-clients-$KAFKA_VERSION.jar"
    "kafka-server-$KAFKA_VERSION.jar" "kafka-raft-$KAFKA_VERSION.jar"
    "kafka-metadata-$KAFKA_VERSION.jar" "kafka-storage-$KAFKA_VERSION.jar"
    "kafka-server-common-$KAFKA_VERSION.jar" "kafka-group-coordinator-$KAFKA_VERSION.jar"
    "scala-library-2.13.*.jar" "log4j-core-2.*.jar" "log4j-slf4j-impl-2.*.jar"
    "slf4j-api-*.jar" "jackson-databind-*.jar"
)

complete() {
    [ -f "$marker" ] || return 1
    local n
    n=$(cat "$marker")
    [ "$(find "$home/libs" -name '*.jar' | wc -l)" = "$n" ] || return 1
    for pattern in "${required[@]}"; do
        compgen -G "$home/libs/$pattern" >/dev/null || return 1
    done
    [ -f "$home/config/log4j2.properties" ]
}

if complete; then
    # The logging config is ours, not downloaded: keep it current for free.
    cmp -s "$here/kafka/log4j2.properties" "$home/config/log4j2.properties" \
        || cp "$here/kafka/log4j2.properties" "$home/config/log4j2.properties"
    exit 0
fi

command -v mvn >/dev/null || { echo "install-kafka: mvn not found (apt-get install maven)" >&2; exit 1; }
command -v java >/dev/null || { echo "install-kafka: java not found (Kafka $KAFKA_VERSION needs Java 17+)" >&2; exit 1; }

echo "install-kafka: fetching Kafka $KAFKA_VERSION jars into $home"
start=$(date +%s)
mkdir -p "$cache"
staging=$(mktemp -d "$cache/.kafka-$KAFKA_VERSION.XXXXXX")
trap 'rm -rf "$staging"' EXIT

# Maven's output goes to a log, shown only when the fetch fails.
if ! mvn -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$staging/libs" </dev/null >"$staging/mvn.log" 2>&1; then
    tail -n 40 "$staging/mvn.log" >&2
    echo "install-kafka: mvn could not fetch Kafka $KAFKA_VERSION (log above)" >&2
    exit 1
fi
rm -f "$staging/mvn.log"
mkdir -p "$staging/config"
cp "$here/kafka/log4j2.properties" "$staging/config/log4j2.properties"

# Swap the finished set in, then write the marker (jar count) last.
rm -rf "$home"
mv "$staging" "$home"
trap - EXIT
find "$home/libs" -name '*.jar' | wc -l > "$marker.tmp"
mv "$marker.tmp" "$marker"
if ! complete; then
    echo "install-kafka: jar set in $home/libs is incomplete" >&2
    rm -f "$marker"
    exit 1
fi
echo "install-kafka: $(cat "$marker") jars in $(( $(date +%s) - start )) s"
