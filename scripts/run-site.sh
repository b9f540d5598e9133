#!/usr/bin/env bash
# Set up everything and run the whole site on this machine: web, Celery workers, beat and the
# simulated demo site. Ctrl-C stops all of it.
#   bash scripts/run-site.sh             # http://127.0.0.1:8000/
#   BMS_PORT=8080 BMS_SPEED=60 bash scripts/run-site.sh
# A second copy on one machine: another BMS_PORT, BMS_DATA_DIR (logs, password file and beat's
# pid file go there too), DATABASE_URL and REDIS_URL. BMS_SKIP_SETUP=1 starts from the venv as
# it is (bench/footprint.py: its venv may be shared, so no install step may touch it).
set -o errexit -o pipefail -o nounset
source "$(dirname "$0")/setup.sh"
if [ "${BMS_SKIP_SETUP:-}" = 1 ]; then cd "$BMS_ROOT"; else bms_setup; fi

PORT="${BMS_PORT:-8000}"
BIND="${BMS_BIND:-127.0.0.1}"
URL="http://127.0.0.1:$PORT"
VAR="${BMS_DATA_DIR:-var}"
case "$VAR" in /*) ;; *) VAR="$BMS_ROOT/$VAR" ;; esac  # relative: to the tree, as in settings
LOGS="$VAR/log"
mkdir -p "$LOGS"

say "Preparing the database"
"$PY" manage.py migrate --no-input -v0
"$PY" manage.py collectstatic --no-input -v0

# One admin login, created once; its password is kept in $VAR (var/) so it can be printed again.
# The password is set only when the user is created or the file is new: setting it again on
# every start would log every admin out (the session hash follows the password hash).
PWFILE="$VAR/admin-password"
RESET=()
if [ ! -s "$PWFILE" ]; then
  "$PY" -c 'import secrets; print(secrets.token_urlsafe(12))' > "$PWFILE"
  chmod 600 "$PWFILE"
  RESET=(--reset)
fi
ADMIN_PASSWORD="$(cat "$PWFILE")"
DJANGO_SUPERUSER_PASSWORD="$ADMIN_PASSWORD" "$PY" manage.py ensure_admin -v0 "${RESET[@]}"

pids=()
stop_all() {  # stop_all [STATUS]: stop what was started, then exit (a signal mid-start too)
  local status=$?
  trap - INT TERM EXIT
  say "Stopping..."
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  exit "${1:-$status}"
}
trap 'stop_all 130' INT
trap 'stop_all 143' TERM
trap stop_all EXIT

start() {  # start NAME COMMAND...: run in the background, log to $LOGS/NAME.log
  local name="$1"; shift
  "$@" >>"$LOGS/$name.log" 2>&1 &
  pids+=($!)
}

# The shape of the stack (docs/DEPLOYMENT.md, "Memory"). BMS_SMALL_BOX=1: one web worker of 8
# threads, one ingest process, beat inside the ingest worker: under 300 MB, for a small box.
if [ "${BMS_SMALL_BOX:-}" = 1 ]; then
  WEB_WORKERS="${BMS_WEB_WORKERS:-1}"; WEB_THREADS="${BMS_WEB_THREADS:-8}"
  INGEST_CONCURRENCY="${BMS_INGEST_CONCURRENCY:-1}"; BEAT_IN_WORKER="${BMS_BEAT_IN_WORKER:-1}"
  WORKER_GROUP="${BMS_WORKER_GROUP:-1}"
else
  WEB_WORKERS="${BMS_WEB_WORKERS:-3}"; WEB_THREADS="${BMS_WEB_THREADS:-4}"
  INGEST_CONCURRENCY="${BMS_INGEST_CONCURRENCY:-2}"; BEAT_IN_WORKER="${BMS_BEAT_IN_WORKER:-0}"
  WORKER_GROUP="${BMS_WORKER_GROUP:-0}"
fi
# BEAT_IN_WORKER=1: beat is a thread of the ingest worker's main process (bms/celery.py,
# BeatThread) instead of a process with its own copy of Django and the tasks.
# WORKER_GROUP=1: gunicorn and the control and ingest workers are forked from one process that
# loaded the code once (bms/worker_group.py); each is still its own process, queues and pool.
CONTROL=(-Q control -c 1 -n control@%h -l INFO)
INGEST=(-Q ingest,commit -c "$INGEST_CONCURRENCY" -n ingest@%h -l INFO)

rm -f "$VAR/celerybeat.pid"
WEB=(bms.wsgi:application --bind "$BIND:$PORT" --workers "$WEB_WORKERS" --threads "$WEB_THREADS" --timeout 30)
# Control gets its own worker so a flood of readings never delays the boiler.
if [ "$WORKER_GROUP" = 1 ]; then
  start site "$PY" -m bms.worker_group gunicorn -c python:bms.gunicorn_conf "${WEB[@]}" \
    -- "${CONTROL[@]}" -- BMS_BEAT_THREAD="$BEAT_IN_WORKER" "${INGEST[@]}"
else
  start web "$VENV/bin/gunicorn" -c python:bms.gunicorn_conf "${WEB[@]}"
  start worker-control "$VENV/bin/celery" -A bms worker "${CONTROL[@]}"
  start worker-ingest env BMS_BEAT_THREAD="$BEAT_IN_WORKER" "$VENV/bin/celery" -A bms worker "${INGEST[@]}"
fi
# Sharded feed writers (BMS_FEED_SHARDS > 1, docs/DEPLOYMENT.md): one writer per shard queue.
SHARDS="${BMS_FEED_SHARDS:-1}"
if [ "$SHARDS" -gt 1 ]; then
  for k in $(seq 0 $((SHARDS - 1))); do
    start "worker-commit-$k" "$VENV/bin/celery" -A bms worker -Q "commit-$k" -c 1 -n "commit$k@%h" -l INFO
  done
fi
[ "$BEAT_IN_WORKER" = 1 ] || start beat "$VENV/bin/celery" -A bms beat -l INFO --pidfile "$VAR/celerybeat.pid"

for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "$URL/admin/login/" 2>/dev/null && break
  "$PY" -c "import urllib.request; urllib.request.urlopen('$URL/admin/login/', timeout=1)" 2>/dev/null && break
  sleep 0.2
done

if "$PY" manage.py help simulate_site >/dev/null 2>&1; then
  # The demo's Modbus relay board and meter follow BMS_PORT (15020/15021 beside 8000), or are
  # free ports: a second copy of this script on another BMS_PORT must not find them taken.
  read -r RELAY_PORT METER_PORT < <("$PY" -m demo.ports "$PORT")
  # The legacy BACnet boiler controller: UDP 47820 beside 8000, 0 (none) when that is taken.
  BACNET_PORT="$("$PY" -m demo.ports --bacnet "$PORT" 2>/dev/null || echo 0)"
  start demo "$PY" manage.py simulate_site --base-url "$URL" --speed "${BMS_SPEED:-1}" \
    --relay-port "$RELAY_PORT" --meter-port "$METER_PORT" --bacnet-port "$BACNET_PORT"
fi
# BACnet's own processes (docs/BACNET.md): COV subscriptions when our plant address is set or
# the demo controller runs; the site's BACnet device only when BMS_BACNET_SERVER_ENABLED.
# One name a line from Python, joined by spaces (echo of the unquoted words) so the banner
# says them on one line.
BACNET_PROCS="$(echo $("$PY" -m bms.site_processes --demo-bacnet-port "${BACNET_PORT:-0}"))"
for proc in $BACNET_PROCS; do
  case "$proc" in
    bacnet-cov) start bacnet-cov "$PY" manage.py bacnet_cov ;;
    bacnet-server) start bacnet-server "$PY" manage.py bacnet_server ;;
  esac
done

cat <<INFO

  Open BMS is running.
    Staff overview   $URL/staff/
    Admin            $URL/admin/      login: admin / $ADMIN_PASSWORD
    Kiosk displays   $URL/kiosk/pv/  $URL/kiosk/thermal/  $URL/kiosk/hydro/
    Rotating kiosk   $URL/kiosk/?rotate=pv,thermal,hydro
    API docs         $URL/api/docs/
    Health           $URL/healthz
    Demo Modbus      relay board 127.0.0.1:${RELAY_PORT:-none}, grid meter 127.0.0.1:${METER_PORT:-none}
    Demo BACnet      boiler controller 127.0.0.1:${BACNET_PORT:-0} (0: off)   $URL/staff/bacnet/
    BACnet processes ${BACNET_PROCS:-none} (logs: bacnet-cov.log, bacnet-server.log)
  The demo's physics runs at ${BMS_SPEED:-1}x: at 1x a room takes an hour or more to warm.
  To see rooms warm in minutes:  BMS_SPEED=60 bash scripts/run-site.sh
  Logs in ${LOGS:-var/log}/. Press Ctrl-C to stop.

INFO
# Exit (and stop everything) as soon as any one process dies, so a failure is not hidden.
wait -n "${pids[@]}" || true
say "A process stopped; see $LOGS/. Shutting down."
