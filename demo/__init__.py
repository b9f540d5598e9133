"""The simulated demo site (a small CAT-like estate) that drives the real system.

Pure physics lives in solar.py, thermal.py, hydro.py, wind.py and weather.py (no Django);
site.py creates the database objects; the running simulator is in simulator.py.
"""
