"""API keys: one user's credentials for the OpenAI-compatible API. Only a digest of each key is stored; the key
itself is shown once, when it is made (openai_api/keys.py)."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiKey(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=80, blank=True)
    # The key's first characters, so its owner can tell keys apart on the account page; not enough to use it.
    prefix = models.CharField(max_length=16)
    # sha256 of the whole key: a key is 256 random bits, so a fast hash is enough (nothing to guess from it).
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def active(self) -> bool:
        return self.revoked_at is None
