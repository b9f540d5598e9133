"""Readings in: the ingest endpoints (views.py, wsgi.py), their formats (parse.py,
emoncms_input.py), node keys (node_auth.py), the per-node Redis Streams (stream.py) drained by
the workers (drain.py) through conversions and input processes (processing.py), and the bounds
ingest keeps (input_budget.py, input_errors.py); node_state.py is each node's last-heard state."""
