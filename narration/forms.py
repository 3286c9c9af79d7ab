"""An instructor's own narration: audio and WebVTT cues, checked by what their bytes are (`files`)."""
from __future__ import annotations

from django import forms
from django.conf import settings

from .files import check_audio, check_cues


class NarrationUploadForm(forms.Form):
    audio = forms.FileField(help_text="WAV, MP3, Ogg or M4A audio, recognised from its contents.")
    vtt = forms.FileField(label="Cues (WebVTT)",
                          help_text="One cue per heading/paragraph, identified c1, c2, … as in the lesson.")
    replace = forms.BooleanField(required=False, label="Replace the narration students hear now")

    def __init__(self, *args, live_narration=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.live_narration = live_narration

    def clean_audio(self):
        audio = self.cleaned_data["audio"]
        try:
            self.audio_kind = check_audio(audio, settings.NARRATION_MAX_AUDIO_BYTES)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return audio

    def clean_vtt(self):
        vtt = self.cleaned_data["vtt"]
        try:
            self.cues = check_cues(vtt)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return vtt

    def clean(self):
        cleaned = super().clean()
        live = self.live_narration
        if live is not None and live.is_ready and not cleaned.get("replace"):
            raise forms.ValidationError(
                f"This module already has a live narration ({live.get_origin_display().lower()}). Tick "
                "“Replace the narration students hear now” to replace it.", code="confirm_replace")
        return cleaned

    def duration(self) -> float:
        """The audio length: from the WAV header (checked in `check_audio`), else the last cue's end."""
        return self.audio_kind.duration or max(cue.end for cue in self.cues)
