"""Errors in OpenAI's shape, so its clients raise their usual exceptions (AuthenticationError on 401,
BadRequestError on 400, RateLimitError on 429):
`{"error": {"message": …, "type": …, "param": …, "code": …}}`."""
from __future__ import annotations

from django.http import JsonResponse

NO_KEY = ("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
          "auth (i.e. Authorization: Bearer YOUR_KEY). Make one on your account page, /account/api-keys/.")
BAD_KEY = "Incorrect API key provided: {shown}. Your keys are listed on your account page, /account/api-keys/."
BAD_JSON = ("We could not parse the JSON body of your request. The API expects a JSON object as the body, sent with "
            "Content-Type: application/json.")


class ApiError(Exception):
    """A request the API refuses, with its HTTP status and OpenAI's fields."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.retry_after = retry_after

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        if self.retry_after is not None:
            response["Retry-After"] = str(self.retry_after)
        if self.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="api"'
        return response


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def shown_key(raw: str) -> str:
    """A key as an error message may repeat it: its ends only (OpenAI's 'sk-abc***xyz')."""
    return f"{raw[:6]}***{raw[-4:]}" if len(raw) > 12 else "***"
