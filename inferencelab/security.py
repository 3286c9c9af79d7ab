"""Security headers Django does not set itself."""
from __future__ import annotations

from django.conf import settings


class ContentSecurityPolicyMiddleware:
    """Adds `Content-Security-Policy` (settings.CONTENT_SECURITY_POLICY) to every response that lacks one."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.policy = settings.CONTENT_SECURITY_POLICY

    def __call__(self, request):
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response
