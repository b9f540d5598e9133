"""A process list checked against the database before it is saved (admin, API, commands).

feeds/processes/catalog.py checks the shape (known process, typed arguments, goto in range,
length bound); here each feed and input a step names must exist, belong to the sensor's site,
and a daily step's feed must be a daily (86400 s) feed. Without this a step pointing at a feed that
does not exist was accepted and its points were dropped at every commit.

Sensor is read through the app registry (`apps.get_model`): Sensor.clean calls this module, so
importing sensors.models here would make the two modules import each other.
"""

from __future__ import annotations

from django.apps import apps

from feeds.models import Feed
from feeds.processes import catalog as process_catalog

DAY_S = 86_400


def check_process_list(
    steps: object, *, site_id: int | None, exclude_sensor: int | None = None
) -> tuple[list[dict], list[str]]:
    """(steps with process names, errors naming the step and field); errors empty when OK.

    `site_id`: the site of the sensor the list is for (None: a node without a site, whose
    steps may name feeds and inputs not tied to another site)."""
    Sensor = apps.get_model("sensors", "Sensor")

    steps, errors = process_catalog.normalise_steps(steps)
    if errors:
        return steps, errors
    feed_ids = process_catalog.feed_ids(steps)
    intervals = dict(Feed.objects.filter(pk__in=feed_ids).values_list("pk", "interval"))
    owners = feed_owner_sites(feed_ids, exclude_sensor=exclude_sensor)
    input_sites = dict(
        Sensor.objects.filter(pk__in=process_catalog.input_ids(steps)).values_list(
            "pk", "node__site_id"
        )
    )
    for i, step in enumerate(steps):
        name = step["process"]
        where = f"step {i} ({name})"
        if "feed" in step:
            feed = step["feed"]
            if feed not in intervals:
                errors.append(f"{where}: 'feed' {feed} does not exist")
            elif (sites := owners.get(feed, set())) and site_id not in sites:
                errors.append(f"{where}: 'feed' {feed} belongs to another site's sensor")
            else:
                errors += _kind_errors(where, name, step, intervals[feed])
        if "input" in step:
            sensor = step["input"]
            if sensor not in input_sites:
                errors.append(f"{where}: 'input' {sensor} is not a sensor")
            elif input_sites[sensor] != site_id:
                errors.append(f"{where}: 'input' {sensor} is a sensor of another site")
    return steps, errors


def _kind_errors(where: str, name: str, step: dict, interval: int) -> list[str]:
    if name in process_catalog.DAILY and interval != DAY_S:
        # One value a day in the slot emoncms uses, so the file reads the same in both.
        return [
            f"{where}: 'feed' {step['feed']} has a {interval} s interval; a daily figure "
            "needs a daily feed (86400 s)"
        ]
    if name in ("power_to_kwh_15m", "power_to_kwh_custom"):
        slot = 15 * 60 if name == "power_to_kwh_15m" else int(step["minutes"]) * 60
        if interval > slot or slot % interval:
            return [
                f"{where}: 'feed' {step['feed']} has a {interval} s interval; a {slot} s slot "
                "needs one that divides it"
            ]
    return []


def feed_owner_sites(feed_ids: set[int], *, exclude_sensor: int | None) -> dict[int, set[int]]:
    """feed id -> the sites (not None) whose sensors write it, leaving out `exclude_sensor`.

    A feed belongs to the sites of the sensors logging it in a saved process list or holding
    it as Sensor.feed; a feed none holds (imported, made by hand) may be used by any site.
    Process lists were always checked when saved and the feed field was not (older rows may
    point anywhere), so
    where a saved process list writes a feed (the excluded sensor's own saved list included),
    a Sensor.feed holder of another site is the intruder and is not counted as an owner: a
    sensor logging its own feed is never flagged because another one wrongly points at it.
    """
    Sensor = apps.get_model("sensors", "Sensor")

    if not feed_ids:
        return {}
    writers: dict[int, set[int | None]] = {}
    writers_excl: dict[int, set[int | None]] = {}
    # Bounded: sensors are bounded per site (sensors/ingest/input_budget.py).
    for pk, site, steps in Sensor.objects.exclude(processes=[]).values_list(
        "pk", "node__site_id", "processes"
    ):
        for feed in process_catalog.feed_ids(steps if isinstance(steps, list) else []):
            if feed in feed_ids:
                writers.setdefault(feed, set()).add(site)
                if pk != exclude_sensor:
                    writers_excl.setdefault(feed, set()).add(site)
    owners: dict[int, set[int]] = {}
    for feed, site in (
        Sensor.objects.filter(feed_id__in=feed_ids)
        .exclude(pk=exclude_sensor)
        .values_list("feed_id", "node__site_id")
    ):
        if feed in writers and site not in writers[feed]:
            continue  # an unchecked pointer at another site's logged feed (see above)
        owners.setdefault(feed, set()).add(site)
    for feed, sites in writers_excl.items():
        owners.setdefault(feed, set()).update(sites)
    return {feed: sites - {None} for feed, sites in owners.items()}


def feed_field_error(feed_id: int | None, *, site_id: int | None, sensor: int | None) -> str:
    """The message for a Sensor.feed naming another site's feed, or "" when allowed."""
    if feed_id is None:
        return ""
    sites = feed_owner_sites({feed_id}, exclude_sensor=sensor).get(feed_id, set())
    if sites and site_id not in sites:
        return f"Feed {feed_id} belongs to another site's sensor."
    return ""
