#!/usr/bin/env bash
# Shared set-up for the two README commands. Idempotent: every step checks before it acts.
#   source scripts/setup.sh; bms_setup [--for-tests]
# Installs what a fresh Debian machine lacks (apt, as root), the Python venv from the lock
# file, Chart.js from npm, and makes sure Redis answers.

BMS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$BMS_ROOT/.venv"
PY="$VENV/bin/python"

say() { printf '\033[1m[bms]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[bms] %s\033[0m\n' "$*" >&2; exit 1; }

_apt_updated=""
apt_install() {
  # Install Debian packages that are missing; only possible as root (or with sudo).
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "Missing Debian packages: ${missing[*]}. Install them: sudo apt-get install ${missing[*]}"
    sudo="sudo"
  fi
  command -v apt-get >/dev/null 2>&1 || die "Missing packages ${missing[*]} and no apt-get here: install them with your package manager."
  say "Installing Debian packages: ${missing[*]}"
  if [ -z "$_apt_updated" ]; then
    $sudo apt-get update -qq || die "apt-get update failed"
    _apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

find_python() {
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}

setup_python() {
  local python
  python="$(find_python)" || die "Python 3.11 or newer is needed: apt-get install python3"
  if [ ! -x "$PY" ]; then
    if ! "$python" -m venv --help >/dev/null 2>&1 || ! "$python" -c 'import ensurepip' 2>/dev/null; then
      apt_install python3-venv
    fi
    say "Creating virtualenv .venv with $python"
    "$python" -m venv "$VENV" || die "could not create .venv"
  fi
  local want have=""
  want="$(sha256sum "$BMS_ROOT/requirements.lock" | cut -d' ' -f1)"
  [ -f "$VENV/.lock-sha" ] && have="$(cat "$VENV/.lock-sha")"
  if [ "$want" != "$have" ]; then
    say "Installing Python packages (requirements.lock)"
    "$PY" -m pip install -q --upgrade pip >/dev/null || die "pip upgrade failed"
    "$PY" -m pip install -q -r "$BMS_ROOT/requirements.lock" || die "pip install failed"
    echo "$want" > "$VENV/.lock-sha"
  fi
}

find_python313() {
  # bac-py (the independent BACnet controller of the tests) needs Python 3.13 or newer.
  for candidate in python3.14 python3.13 /root/.pyenv/versions/3.1[34]*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 13) else 1)' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}

setup_bacnet_peer() {
  # tests/sensors/test_bacnet.py runs a simulated BACnet controller under bac-py, a stack
  # independent of ours, in a venv of its own (requirements-bacnet-peer.txt).
  local peer="$BMS_ROOT/.venv-bacnet-peer" want have="" python
  want="$(sha256sum "$BMS_ROOT/requirements-bacnet-peer.txt" | cut -d' ' -f1)"
  [ -f "$peer/.lock-sha" ] && have="$(cat "$peer/.lock-sha")"
  [ "$want" = "$have" ] && return 0
  python="$(find_python313)" || die "The BACnet tests need Python 3.13 for bac-py: install python3.13"
  say "Creating .venv-bacnet-peer (bac-py) with $python"
  "$python" -m venv "$peer" || die "could not create .venv-bacnet-peer"
  "$peer/bin/python" -m pip install -q -r "$BMS_ROOT/requirements-bacnet-peer.txt" || die "pip install bac-py failed"
  echo "$want" > "$peer/.lock-sha"
}

setup_node() {
  [ -f "$BMS_ROOT/package.json" ] || return 0
  command -v npm >/dev/null 2>&1 || apt_install nodejs npm
  local want have=""
  want="$(sha256sum "$BMS_ROOT/package-lock.json" | cut -d' ' -f1)"
  [ -f "$BMS_ROOT/node_modules/.lock-sha" ] && have="$(cat "$BMS_ROOT/node_modules/.lock-sha")"
  if [ "$want" != "$have" ]; then
    say "Installing front-end packages (npm ci)"
    (cd "$BMS_ROOT" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
    echo "$want" > "$BMS_ROOT/node_modules/.lock-sha"
  fi
}

redis_url_host_port() {
  # Host and port of REDIS_URL (default redis://127.0.0.1:6379/0).
  local url="${REDIS_URL:-redis://127.0.0.1:6379/0}"
  local rest="${url#*://}"; rest="${rest#*@}"; rest="${rest%%/*}"
  REDIS_HOST="${rest%%:*}"; REDIS_PORT="${rest##*:}"
  [ "$REDIS_PORT" = "$rest" ] && REDIS_PORT=6379
  return 0
}

redis_answers() {
  "$PY" - "$REDIS_HOST" "$REDIS_PORT" <<'PYEOF' 2>/dev/null
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as s:
        s.sendall(b"PING\r\n")
        sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
except OSError:
    sys.exit(1)
PYEOF
}

ensure_redis() {
  redis_url_host_port
  redis_answers && return 0
  case "$REDIS_HOST" in
    127.0.0.1|localhost|::1) ;;
    *) die "Redis at $REDIS_HOST:$REDIS_PORT does not answer. Start it, or unset REDIS_URL to use a local one." ;;
  esac
  if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt_install redis-server
    else
      die "Redis is not installed. Install it (Debian: sudo apt-get install redis-server) and run this again."
    fi
  fi
  say "Starting Redis on 127.0.0.1:$REDIS_PORT (appendonly, data in var/redis)"
  mkdir -p "$BMS_ROOT/var/redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$BMS_ROOT/var/redis" \
    --appendonly yes --logfile "$BMS_ROOT/var/redis/redis.log" >/dev/null || die "redis-server failed to start"
  for _ in $(seq 1 50); do redis_answers && return 0; sleep 0.1; done
  die "Redis did not come up: see var/redis/redis.log"
}

port_answers() {  # port_answers HOST PORT: something accepts TCP connections there
  "$PY" -c "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()" "$1" "$2" 2>/dev/null
}

ensure_mosquitto() {
  # The MQTT ingest tests talk to a real broker at 127.0.0.1:1883.
  port_answers 127.0.0.1 1883 && return 0
  command -v mosquitto >/dev/null 2>&1 || apt_install mosquitto
  say "Starting Mosquitto on 127.0.0.1:1883"
  mosquitto -d -p 1883 >/dev/null 2>&1 || die "mosquitto failed to start"
  for _ in $(seq 1 50); do port_answers 127.0.0.1 1883 && return 0; sleep 0.1; done
  die "Mosquitto did not come up on 127.0.0.1:1883"
}

bms_setup() {
  cd "$BMS_ROOT" || die "cannot cd to $BMS_ROOT"
  setup_python
  setup_node
  if [ "${1:-}" = "--for-tests" ]; then
    # Headless Chromium drives the kiosk and staff pages in the browser tests.
    [ -x /usr/bin/chromium ] || apt_install chromium
    setup_bacnet_peer
    # docs/DEPLOYMENT.md and tests/foundation/test_docker.py validate docker/compose.yaml with
    # `docker compose config` (v2) or docker-compose (v1, Debian's package); no engine needed.
    docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 ||
      apt_install docker-compose
    # tests/security/test_proxy.py runs docker/nginx.conf under a real nginx (never started as
    # a service here: the test runs its own, on free ports); the MQTT login tests make a
    # password file with mosquitto_passwd (package mosquitto) and certificates with openssl.
    # (On a systemd machine Debian starts nginx's default site on port 80 when it installs the
    # package; `sudo systemctl disable --now nginx` if you do not want that.)
    [ -x /usr/sbin/nginx ] || apt_install nginx
    command -v openssl >/dev/null 2>&1 || apt_install openssl
    # tests/sensors/test_modbus_rtu.py joins a Modbus RTU server and client by a socat
    # pseudo-terminal pair: an RS-485 bus without the wires.
    command -v socat >/dev/null 2>&1 || apt_install socat
    # tests/energy/test_monthly_report.py reads the monthly report PDF back (pdftotext) and
    # draws its page (pdftoppm).
    command -v pdftoppm >/dev/null 2>&1 || apt_install poppler-utils
    # tests/integration/test_emoncms_live_differential.py runs emoncms itself (its PHP source,
    # not shipped: EMONCMS_DIR, skipped without it) under PHP's built-in server, on MariaDB
    # and a redis-server of its own; index.php needs mysqli, redis, gettext and mbstring.
    apt_install php-cli php-mysql php-redis php-mbstring
  fi
  ensure_redis
  if [ "${1:-}" = "--for-tests" ]; then
    ensure_mosquitto
  fi
}
