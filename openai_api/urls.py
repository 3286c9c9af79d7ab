from django.urls import path, re_path

from . import account, views

app_name = "openai_api"

urlpatterns = [
    path("v1/chat/completions", views.chat_completions, name="chat_completions"),
    path("v1/completions", views.completions, name="completions"),
    path("v1/models", views.models, name="models"),
    path("v1/models/<str:name>", views.models, name="model"),
    re_path(r"^v1/(?P<rest>.*)$", views.not_found),
    path("account/api-keys/", account.api_keys, name="keys"),
    path("account/api-keys/<int:key_id>/revoke/", account.revoke_key, name="revoke"),
]
