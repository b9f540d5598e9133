"""Feeds over HTTP: the emoncms-compatible /feed/* paths (views.py, urls.py) and the typed
DRF API under /api/v1/feeds/ (api.py, data_api.py), sharing one request parser (query.py)."""
