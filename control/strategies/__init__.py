"""Control strategies: each a small pure function of plain data (see control/state.py).

The evaluator (control/evaluator.py) combines them in priority order:
safety > manual override > demand > off.
"""
