"""emoncms-compatible input paths: emonTx, emonPi and emonhub post here unchanged; emoncms's
clients read inputs and edit process lists."""

from django.urls import path

from sensors import emoncms_input_views as inputs
from sensors.ingest import views as ingest_views

urlpatterns = [
    path("input/post", ingest_views.input_post, name="input-post"),
    path("input/post.json", ingest_views.input_post, name="input-post-json"),
    path("input/bulk", ingest_views.input_bulk, name="input-bulk"),
    path("input/bulk.json", ingest_views.input_bulk, name="input-bulk-json"),
    # What emoncms's clients read (sensors/emoncms_input_views.py)
    path("input/list.json", inputs.InputList.as_view(), name="input-list-json"),
    path("input/list", inputs.InputList.as_view(), name="input-list"),
    path("input/getinputs.json", inputs.InputGetInputs.as_view(), name="input-getinputs-json"),
    path("input/get.json", inputs.InputGet.as_view(), name="input-get-json"),
    path("input/get", inputs.InputGet.as_view(), name="input-get"),
    path("input/get/<str:node>", inputs.InputGet.as_view(), name="input-get-node"),
    path("input/get/<str:node>/<str:name>", inputs.InputGet.as_view(), name="input-get-name"),
    path(
        "input/get/<str:site>/<str:node>/<str:name>",
        inputs.InputGet.as_view(),
        name="input-get-site-name",
    ),
    path("input/process/get.json", inputs.ProcessGet.as_view(), name="input-process-get"),
    path("input/process/set.json", inputs.ProcessSet.as_view(), name="input-process-set"),
]
