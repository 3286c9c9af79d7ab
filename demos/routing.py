from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path("ws/demos/", consumers.DemoConsumer.as_asgi()),
    path("ws/demos/dashboard/", consumers.DashboardConsumer.as_asgi()),
]
