"""The heartbeats that prove beat and the workers alive: Redis keys stamped every few seconds.

Beat's process stamps BEAT_HEARTBEAT_KEY from a thread (bms/celery.py); a worker stamps
WORKER_HEARTBEAT_KEY when it runs the heartbeat task (alarms/tasks.py). /healthz (bms/health.py)
and the system watchdog (alarms/watchdog.py) read them.
"""

BEAT_HEARTBEAT_KEY = "bms:health:beat"
# Set by beat as it stops on a signal (a planned restart, `docker compose restart`): the time it
# stopped. Within the grace after it, a missing heartbeat is a restart, not a dead beat
# (alarms/watchdog.py check_beat).
BEAT_STOPPED_KEY = "bms:health:beat-stopped"
WORKER_HEARTBEAT_KEY = "bms:health:worker"
HEARTBEAT_EVERY_S = 10
