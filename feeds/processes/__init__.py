"""Input processes as emoncms defines them: the catalogue (catalog.py), what each step does
(steps.py) and the runner of a sensor's list of steps (run.py)."""
