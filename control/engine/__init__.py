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
    tick.py            one evaluation's shared state; the rules every actuator shares
                       (override, min on/off, pump kick, idle state)
    zones.py           rooms and circuits: frost, over-temperature, override, occupancy,
                       optimum start / stop, setback, the lost-sensor fallback
    heating_plant.py   boiler and pump: demand, overrun, plant frost, no-bypass circuit
    weather_output.py  a weather-compensated plant's mixing valve / flow set point
    solar_circuit.py   solar thermal pump: differential, limits, lost-sensor safe state
    open_window.py     a zone's open window (a drop while heating, or a contact): heating paused
    heat_main.py       several heat sources on one main: lead/lag staging, rotation, lost source
    thermal_store.py   a heat main's store: charge by top / bottom, serve the main, lost sensor
    strategies/        one small pure rule each (thermostat, frost, optimum start, solar, ...)
    weather.py         heating curve, PI mixing loop, three-point valve, analogue scaling
    timefmt.py         wall-clock helpers and the one way reasons write dates
"""
