# The shell variables the docs' examples use. From the project root, on a site where the demo
# has been set up (`manage.py simulate_site`, or `--setup-only`):
#
#   . docs/examples/env.sh
#
# Any variable already set is kept, so point it elsewhere with e.g.
#   BMS=https://bms.example.org BMS_USER=alice . docs/examples/env.sh
#
# BMS       the site's base URL                     (default http://127.0.0.1:8000)
# TOKEN     a new API token of the staff user $BMS_USER (default admin); each sourcing makes one
# NODE      a node's name                           (default the demo's PV node, emontx-pv)
# NODE_KEY  that node's write key, from the demo's key file ($BMS_DATA_DIR/demo/keys.json);
#           for your own node: the last line `manage.py createnode` printed
# FEED      the id of that node's power feed, KWH_FEED its energy (kWh) feed
BMS=${BMS:-http://127.0.0.1:8000}
TOKEN=${TOKEN:-$(.venv/bin/python manage.py create_api_token "${BMS_USER:-admin}" | tail -n 1)}
NODE=${NODE:-emontx-pv}
NODE_KEY=${NODE_KEY:-$(.venv/bin/python -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
  "${BMS_DATA_DIR:-var}/demo/keys.json" "$NODE")}
# /feed/list.json lists every feed you may read: pick this node's (tag) W and kWh feeds.
_feeds=$(curl -s -H "Authorization: Token $TOKEN" "$BMS/feed/list.json")
FEED=${FEED:-$(printf '%s' "$_feeds" | .venv/bin/python -c 'import json, sys
print(next(f["id"] for f in json.load(sys.stdin) if f["tag"] == sys.argv[1] and f["unit"] == "W"))' "$NODE")}
KWH_FEED=${KWH_FEED:-$(printf '%s' "$_feeds" | .venv/bin/python -c 'import json, sys
print(next(f["id"] for f in json.load(sys.stdin) if f["tag"] == sys.argv[1] and f["unit"] == "kWh"))' "$NODE")}
unset _feeds
export BMS TOKEN NODE NODE_KEY FEED KWH_FEED
