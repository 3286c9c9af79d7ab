from django.urls import path, re_path

from . import consumers

websocket_urlpatterns = [
    path("ws/demos/", consumers.DemoConsumer.as_asgi()),
    path("ws/demos/dashboard/", consumers.DashboardConsumer.as_asgi()),
    re_path(r"", consumers.NotFoundConsumer.as_asgi()),  # any other path: a clean 4404 close, not a 500
]
