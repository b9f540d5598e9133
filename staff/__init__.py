"""Staff pages that span apps: the overview, the feed explorer with its CSV export, the alarm list,
and programming the site: schedules, site calendars and rooms in buildings (staff/schedules.py).

The page shell every staff page extends (base.html, staff.css, live.js) lives in core, so the
apps below draw their own pages on it; this app is the one place that reads from all of them.
"""
