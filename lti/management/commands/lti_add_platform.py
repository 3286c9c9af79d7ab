"""Register an LMS (platform) with the values its tool registration shows; see docs/lti.md."""
import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

from lti import platform_urls
from lti.framing import origins_of
from lti.keys import tool_key
from lti.models import Embedding


class Command(BaseCommand):
    help = "Register an LMS platform (or update the one with this issuer and client id)."

    def add_arguments(self, parser):
        parser.add_argument("--title", required=True)
        parser.add_argument("--issuer", required=True,
                            help="The platform's issuer (iss), e.g. https://canvas.instructure.com")
        parser.add_argument("--client-id", required=True)
        parser.add_argument("--login-url", required=True, help="The platform's OIDC authorization endpoint")
        parser.add_argument("--token-url", required=True, help="The platform's OAuth2 access token endpoint")
        parser.add_argument("--jwks-url", required=True, help="The platform's public keyset URL")
        parser.add_argument("--audience", default="", help="The token endpoint's audience, when not its URL")
        parser.add_argument("--deployment", action="append", required=True, help="A deployment id (repeatable)")
        parser.add_argument("--frame-origin", action="append", default=[],
                            help="An origin that shows the tool in a frame, besides the issuer's and login URL's "
                                 "(repeatable; Canvas: the school's Canvas address, e.g. https://school.instructure.com)")

    def handle(self, *args, **options):
        platform = LtiTool.objects.filter(issuer=options["issuer"], client_id=options["client_id"]).first() \
            or LtiTool(issuer=options["issuer"], client_id=options["client_id"])
        platform.title = options["title"]
        platform.auth_login_url = options["login_url"]
        platform.auth_token_url = options["token_url"]
        platform.key_set_url = options["jwks_url"]
        platform.auth_audience = options["audience"] or None
        platform.deployment_ids = json.dumps(sorted(set(options["deployment"])))
        platform.tool_key = tool_key()
        platform.is_active = True
        try:
            platform.full_clean()
        except ValidationError as error:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())) from error
        insecure = platform_urls.problems({field: getattr(platform, field) for field in platform_urls.URL_FIELDS})
        if insecure:
            option = {"auth_login_url": "--login-url", "auth_token_url": "--token-url", "key_set_url": "--jwks-url"}
            raise CommandError("; ".join(f"{option[field]} {problem}" for field, problem in insecure.items()))
        embedding = Embedding(platform=platform, origins="\n".join(options["frame_origin"]))
        try:
            embedding.full_clean(exclude=["platform"])
        except ValidationError as error:
            raise CommandError("--frame-origin: " + " ".join(error.message_dict["origins"])) from error
        platform.save()
        Embedding.objects.update_or_create(platform=platform, defaults={"origins": embedding.origins})
        self.stdout.write(f"Registered {platform.title} ({platform.issuer}, client id {platform.client_id}); "
                          f"may frame its launches: {', '.join(origins_of(platform))}.")
