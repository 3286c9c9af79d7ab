"""Password reset that tells nobody whether an address has an account.

Django's view already answers every well-formed address with the same redirect; what still differed was the work
behind it (building and sending the e-mail, seconds against an SMTP server, or an error). Here the e-mail is
sent from one background thread, so the answer and its timing are the same for a known and an unknown address,
and requests are counted per client address (`address_quota.PASSWORD_RESET`) so the form is no mail cannon.
Accounts with no usable password (made by an import and not yet taken over, or signing in through an LMS) get
no e-mail: Django's form skips them, so such an account gets a password only from its owner's own link.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.views import PasswordResetView

from inferencelab import login_throttle
from inferencelab.address_quota import PASSWORD_RESET

# One thread: e-mails go out in order, and a slow mail server holds up only this queue, never a request.
outbox = ThreadPoolExecutor(max_workers=1, thread_name_prefix="password-reset-mail")


class PrivatePasswordResetForm(PasswordResetForm):
    def send_mail(self, *args, **kwargs) -> None:
        outbox.submit(super().send_mail, *args, **kwargs)


class PrivatePasswordResetView(PasswordResetView):
    form_class = PrivatePasswordResetForm

    def post(self, request, *args, **kwargs):
        if wait := PASSWORD_RESET.wait(request):
            form = self.get_form()
            form.is_valid()
            form.add_error(None, f"Too many password-reset requests from your network address. Try again in "
                                 f"{login_throttle.wait_message(wait)}.")
            response = self.render_to_response(self.get_context_data(form=form), status=429)
            response["Retry-After"] = str(wait)
            return response
        PASSWORD_RESET.record(request)
        return super().post(request, *args, **kwargs)
