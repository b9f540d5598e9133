"""emoncms-compatible feed reads: /feed/list.json, /feed/timevalue.json, /feed/data.json.

Same parameters and reply shapes as emoncms, so its graphs, apps and scripts work unchanged
(see docs/FEEDS.md). Access rules and parameter parsing: feeds/query.py.
"""

from __future__ import annotations

from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bms.authentication import TokenAuth
from bms.throttle import PublicRateThrottle
from feeds import phpfina, query, service
from feeds.models import Feed

PHPFINA_ENGINE = 5  # emoncms's engine number for PHPFina


class EmoncmsView(APIView):
    # Anyone may ask; feeds/query.py decides per feed (public feeds are readable anonymously).
    permission_classes = [AllowAny]
    authentication_classes = [
        query.ApiKeyQueryAuthentication,
        TokenAuth,
        SessionAuthentication,
    ]
    renderer_classes = [JSONRenderer]
    throttle_classes = [PublicRateThrottle]  # one count with /kiosk/*, per IP or user
    schema = None  # documented in the OpenAPI schema under /api/v1/feeds/ instead


class FeedList(EmoncmsView):
    def get(self, request: Request) -> Response:
        feeds = Feed.objects.all()
        if not query.is_staff_reader(request.user):
            feeds = feeds.filter(public=True)
        feeds = list(feeds)
        last = service.last_values(f.id for f in feeds)
        out = []
        for feed in feeds:
            t, v = last.get(feed.id, (None, None))
            out.append(
                {
                    "id": feed.id,
                    "name": feed.name,
                    "tag": feed.tag,
                    "unit": feed.unit,
                    "public": feed.public,
                    "engine": PHPFINA_ENGINE,
                    "interval": feed.interval,
                    "size": _size(feed.id),
                    "time": t,
                    "value": v,
                }
            )
        return Response(out)


def _size(feed_id: int) -> int:
    try:
        return phpfina.npoints(service.feed_dir(), feed_id) * phpfina.VALUE_SIZE
    except phpfina.CorruptFeed:
        return -1


class TimeValue(EmoncmsView):
    def get(self, request: Request) -> Response:
        feed_id = query.parse_id(request.query_params.get("id"))
        query.readable_feeds(request.user, [feed_id])
        last = service.last_value(feed_id)
        if last is None:
            return Response({"time": None, "value": None})
        return Response({"time": last[0], "value": last[1]})


class Data(EmoncmsView):
    def get(self, request: Request) -> Response:
        params = request.query_params
        q = query.parse_data_query(params)
        feeds = query.readable_feeds(request.user, q.feed_ids)
        series = query.run(q, feeds)
        if "ids" in params and params.get("ids"):
            return Response([{"feedid": i, "data": d} for i, d in series.items()])
        return Response(series[q.feed_ids[0]])
