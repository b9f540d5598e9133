"""URL wiring. Each app owns its routes: `<app>/urls.py` (pages, emoncms-compatible paths)
and `<app>/api_urls.py` (DRF, mounted under /api/v1/)."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from bms import health
from core.openapi import CachedSchemaView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("api/schema/", CachedSchemaView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("feeds.web.api_urls")),
    path("api/v1/", include("sensors.api_urls")),
    path("api/v1/", include("alarms.api_urls")),
    path("api/v1/", include("control.api_urls")),
    path("api/v1/", include("displays.api_urls")),
    path("api/v1/", include("energy.api_urls")),
    path("api/v1/", include("findings.api_urls")),
    path("", include("core.emoncms_urls")),
    path("", include("feeds.web.urls")),
    path("", include("sensors.urls")),
    path("", include("control.urls")),
    path("", include("displays.urls")),
    path("", include("energy.urls")),
    path("", include("staff.urls")),
]

# Refusals before any view (a Host not allowed) as JSON on API, ingest and feed paths.
handler400 = "core.api_errors.bad_request"
# Unknown paths under /api/ (and the ingest and feed paths) as JSON 404s.
handler404 = "core.api_errors.not_found"
