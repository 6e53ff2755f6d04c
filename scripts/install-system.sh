#!/usr/bin/env bash
# Debian packages for dpmstream's real services: rsyslog with omkafka, kcat,
# Prometheus, Nagios 4 and docker-compose. Idempotent: a machine that has them all
# spends no time here. Needs root (or sudo) when something is missing.
#
# The project runs its own private instances of these daemons (own configs, ports,
# pid files on 127.0.0.1); the packages' system services must not run beside them,
# so installing starts no service, and any that an install started is stopped.
set -euo pipefail

PACKAGES=(rsyslog rsyslog-kafka kcat prometheus nagios4-core docker-compose
          chromium fonts-dejavu-core)   # chromium: the report's browser test
# Daemons these packages may start; stopped after an install if they came up.
SERVICES=(rsyslog prometheus nagios4)

missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = installed ] || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "install-system: installing ${missing[*]}"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-system: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    SUDO=(sudo -n)
fi

export DEBIAN_FRONTEND=noninteractive
# policy-rc.d exit 101 tells invoke-rc.d (and so the packages' postinst) to start no
# service. Put one in place only for the install, and only if the machine has none.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# dpmstream install-system: start no service during the install\nexit 101\n' \
        | "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 755 "$policy"
    added_policy=1
fi
cleanup() { if [ "$added_policy" = 1 ]; then "${SUDO[@]}" rm -f "$policy"; fi; }
trap cleanup EXIT

"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}" </dev/null

# Belt and braces: if a service came up anyway (a machine with systemd ignores
# policy-rc.d for some units), stop it and keep it from starting at boot.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    for svc in "${SERVICES[@]}"; do
        if systemctl is-active --quiet "$svc" 2>/dev/null; then
            echo "install-system: stopping system service $svc (dpmstream runs its own)"
            "${SUDO[@]}" systemctl stop "$svc" || true
            "${SUDO[@]}" systemctl disable "$svc" >/dev/null 2>&1 || true
        fi
    done
else
    for svc in "${SERVICES[@]}"; do
        if [ -x "/etc/init.d/$svc" ] && "/etc/init.d/$svc" status >/dev/null 2>&1; then
            echo "install-system: stopping system service $svc (dpmstream runs its own)"
            "${SUDO[@]}" "/etc/init.d/$svc" stop || true
        fi
    done
fi
echo "install-system: done"
