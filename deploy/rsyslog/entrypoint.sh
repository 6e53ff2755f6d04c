#!/bin/sh
# Render the shipped drop-in (rsyslog/dpmstream.conf, mounted read-only) for the compose
# network: the broker from $KAFKA_BROKERS, the topic from $KAFKA_TOPIC, and SASL/PLAIN
# login from $KAFKA_SASL_USERNAME / $KAFKA_SASL_PASSWORD. The password only ever lands in
# the rendered file (mode 600), never on a command line or in rsyslog's output.
#   entrypoint.sh            render, then run rsyslogd in the foreground
#   entrypoint.sh --render   render only (tests check the result with rsyslogd -N1)
set -eu
SRC=${DPMSTREAM_RSYSLOG_SRC:-/etc/dpmstream/rsyslog/dpmstream.conf}
OUT=${DPMSTREAM_RSYSLOG_OUT:-/run/dpmstream/dpmstream.conf}
: "${KAFKA_BROKERS:?set KAFKA_BROKERS}"
: "${KAFKA_SASL_USERNAME:?set KAFKA_SASL_USERNAME}"
: "${KAFKA_SASL_PASSWORD:?set KAFKA_SASL_PASSWORD}"
TOPIC=${KAFKA_TOPIC:-dpm.lines}

for v in "$KAFKA_BROKERS" "$TOPIC" "$KAFKA_SASL_USERNAME" "$KAFKA_SASL_PASSWORD"; do
    case $v in *\"*|*\\*|*\|*) echo "entrypoint: a Kafka setting holds a quote, backslash or |" >&2; exit 2;; esac
done
grep -q '^ *broker=\[' "$SRC" || { echo "entrypoint: no broker=[...] line in $SRC" >&2; exit 2; }
grep -q '^ *confParam=\[' "$SRC" || { echo "entrypoint: no confParam=[...] line in $SRC" >&2; exit 2; }

brokers=$(printf '%s' "$KAFKA_BROKERS" | sed 's/[^,][^,]*/"&"/g; s/,/, /g')
umask 077
mkdir -p "$(dirname "$OUT")"
sed -e "s|^\( *\)broker=\[.*\]|\1broker=[$brokers]|" \
    -e "s|^\( *\)topic=\".*\"|\1topic=\"$TOPIC\"|" \
    -e "s|^\( *\)confParam=\[\(.*\)\]|\1confParam=[\2, \"security.protocol=SASL_PLAINTEXT\", \"sasl.mechanisms=PLAIN\", \"sasl.username=$KAFKA_SASL_USERNAME\", \"sasl.password=$KAFKA_SASL_PASSWORD\"]|" \
    "$SRC" > "$OUT"

[ "${1:-}" = "--render" ] && exit 0
exec rsyslogd -n -f /etc/rsyslog.conf
