"""Control's decisions, as a pure engine: specs in, decisions with reasons out.

Nothing in this package touches Django, the database, Redis, Celery or the network, and it
imports nothing of ours outside `control.engine` (an import contract holds it so in CI). What it
needs from the outside world (the site's time zone, the settings' limits and fallback duty, the
tick length) arrives as plain data in the specs, built from the models by control/mapper.py.
That is what lets the live tick, the offline configuration cache and replay over recorded
history share one evaluation, and lets tests drive it with hand-made snapshots.

    specs.py           the dataclasses: Snapshot, ZoneSpec, ActuatorSpec, PlantSpec, ... and
                       Decision / ZoneResult / OutputDecision / Evaluation
    evaluator.py       evaluate(snapshot): priority safety > override > demand > off
    strategies/        one small pure rule each (thermostat, frost, optimum start, solar, ...)
    weather.py         heating curve, PI mixing loop, three-point valve, analogue scaling
    timefmt.py         wall-clock helpers and the one way reasons write dates
"""
