"""The heartbeats that prove beat and the workers alive: Redis keys stamped every few seconds.

Beat's process stamps BEAT_HEARTBEAT_KEY from a thread (bms/celery.py); a worker stamps
WORKER_HEARTBEAT_KEY when it runs the heartbeat task (alarms/tasks.py). /healthz (bms/health.py)
and the system watchdog (alarms/watchdog.py) read them.
"""

BEAT_HEARTBEAT_KEY = "bms:health:beat"
WORKER_HEARTBEAT_KEY = "bms:health:worker"
HEARTBEAT_EVERY_S = 10
