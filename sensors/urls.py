"""emoncms-compatible ingest paths: emonTx, emonPi and emonhub post here unchanged."""

from django.urls import path

from sensors.ingest import views as ingest_views

urlpatterns = [
    path("input/post", ingest_views.input_post, name="input-post"),
    path("input/post.json", ingest_views.input_post, name="input-post-json"),
    path("input/bulk", ingest_views.input_bulk, name="input-bulk"),
    path("input/bulk.json", ingest_views.input_bulk, name="input-bulk-json"),
]
