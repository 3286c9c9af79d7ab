"""This install's LTI key pair: made once, on first need, and kept in the database (`LtiToolKey`), so every
web process signs with the same key and the JWKS endpoint publishes it. Only the public half ever leaves."""
from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.db import transaction
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiToolKey

KEY_NAME = "inference-lab"
KEY_BITS = 2048


def _new_pair() -> tuple[str, str]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    private_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()).decode()
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private_pem, public_pem


@transaction.atomic
def tool_key() -> LtiToolKey:
    """The install's key, made now if there is none yet."""
    key = LtiToolKey.objects.select_for_update().filter(name=KEY_NAME).first()
    if key is None:
        private_pem, public_pem = _new_pair()
        key = LtiToolKey.objects.create(name=KEY_NAME, private_key=private_pem, public_key=public_pem)
    return key
