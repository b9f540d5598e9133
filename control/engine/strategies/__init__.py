"""Control strategies: each a small pure function of plain data (see control/engine/specs.py).

The evaluator (control/engine/evaluator.py) combines them in priority order:
safety > manual override > demand > off.
"""
