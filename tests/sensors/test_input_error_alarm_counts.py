"""The input-error alarm counts the skipped values and shows the newest, as ALARMS.md says,
brought up to date at most every SYNC_EVERY_S (an outside tester found it stuck at 1 and its
message frozen at the first request after 190 refused floods)."""

from __future__ import annotations

from alarms.models import Alarm
from sensors.ingest import input_errors
from sensors.ingest.emoncms_input import Skipped

SUBJECT = input_errors.gateway_subject(7)
T0 = 1_800_000_000.0


def skips(n: int, what: str) -> list[Skipped]:
    return [Skipped(i, "data[2]", f"text '{what}' is not a number") for i in range(n)]


def the_alarm() -> Alarm:
    return Alarm.objects.get(key=SUBJECT, cleared_at__isnull=True)


def test_the_alarm_opens_with_the_first_batchs_count(db, redis_client):
    input_errors.record(SUBJECT, "Gateway key 'hub'", skips(3, "a"), now=T0)
    alarm = the_alarm()
    assert alarm.occurrences == 3 and "'a'" in alarm.message


def test_later_batches_are_counted_and_the_message_follows_the_newest(db, redis_client):
    input_errors.record(SUBJECT, "Gateway key 'hub'", skips(3, "a"), now=T0)
    # Within the sync period: counted in Redis, no database write.
    input_errors.record(SUBJECT, "Gateway key 'hub'", skips(4, "b"), now=T0 + 1)
    assert the_alarm().occurrences == 3
    # After it: everything since is on the alarm, with the newest skips as its message.
    later = T0 + input_errors.SYNC_EVERY_S + 1
    input_errors.record(SUBJECT, "Gateway key 'hub'", skips(5, "c"), now=later)
    alarm = the_alarm()
    assert alarm.occurrences == 3 + 4 + 5 and "'c'" in alarm.message
    assert Alarm.objects.filter(key=SUBJECT).count() == 1


def test_a_cleared_alarm_reopens_with_only_the_new_count(db, redis_client):
    input_errors.record(SUBJECT, "Gateway key 'hub'", skips(3, "a"), now=T0)
    input_errors.record(SUBJECT, "Gateway key 'hub'", skips(2, "b"), now=T0 + 1)  # unsynced
    input_errors.clean([SUBJECT], now=T0 + input_errors.CLEAR_AFTER_S + 1)
    assert not Alarm.objects.filter(key=SUBJECT, cleared_at__isnull=True).exists()
    input_errors.record(SUBJECT, "Gateway key 'hub'", skips(1, "z"), now=T0 + 7200)
    assert the_alarm().occurrences == 1
