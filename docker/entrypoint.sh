#!/usr/bin/env bash
# One entrypoint for every role; the compose file picks the role as the command.
set -o errexit -o pipefail -o nounset

case "${1:-web}" in
  web)
    python manage.py migrate --no-input
    exec gunicorn -c python:bms.gunicorn_conf bms.wsgi:application --bind 0.0.0.0:8000 \
      --workers "${WEB_WORKERS:-3}" --threads 4 --timeout 30 --access-logfile -
    ;;
  worker)
    exec celery -A bms worker -Q "${CELERY_QUEUES:-ingest,commit}" -c "${CELERY_CONCURRENCY:-2}" -l INFO
    ;;
  worker-commit)
    # One feed shard's writer (BMS_FEED_SHARDS > 1): BMS_FEED_SHARD names the shard.
    exec celery -A bms worker -Q "commit-${BMS_FEED_SHARD:?set BMS_FEED_SHARD}" -c 1 \
      -n "commit${BMS_FEED_SHARD}@%h" -l INFO
    ;;
  worker-control)
    # Its own worker so a flood of readings never delays the boiler.
    exec celery -A bms worker -Q control -c 1 -n control@%h -l INFO
    ;;
  beat)
    # RedBeat's lock in Redis: a second beat (another host) waits as a standby, never doubles a tick.
    exec celery -A bms beat -l INFO --pidfile /tmp/celerybeat.pid
    ;;
  bacnet-cov)
    # COV subscriptions to the recorded BACnet points (docs/BACNET.md): one per site.
    exec python manage.py bacnet_cov
    ;;
  bacnet-server)
    # The site as a BACnet device: refuses to start unless BMS_BACNET_SERVER_ENABLED.
    exec python manage.py bacnet_server
    ;;
  manage)
    shift
    exec python manage.py "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
