from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm

from .content import MAX_ORDER, SLUG_RE
from .loader import normalize_newlines, prerequisite_cycle
from .models import Module, Track
from .quiz_ids import with_stable_ids
from .rendering import ContentError, render_markdown


class SignupForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        fields = ("username",)


class PreferenceForm(forms.Form):
    autoplay = forms.BooleanField(
        required=False, label="Start the audio version automatically when I open a module"
    )


class ModuleForm(forms.ModelForm):
    """Front matter + Markdown body; the body is rendered (and its demos validated) on clean."""

    prerequisites = forms.CharField(
        required=False,
        help_text="Module slugs, separated by commas, e.g. prefill-decode, kv-cache.",
    )
    source = forms.CharField(
        required=False,
        strip=False,  # whitespace is content: the body must round-trip to the file byte for byte
        label="Lesson (Markdown)",
        widget=forms.Textarea(attrs={"rows": 28, "spellcheck": "true", "class": "md-editor"}),
        help_text="Directives: :::{demo} NAME with JSON props, :::{calculator} NAME, :::{callout} note|warning, "
                  ":::{quiz} with a YAML list of questions. Close each with ':::'.",
    )

    class Meta:
        model = Module
        fields = ["title", "short_title", "slug", "track", "order", "prerequisites", "summary", "source"]
        widgets = {"summary": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rendered = None
        self.fields["track"].queryset = Track.objects.order_by("order")
        if self.instance.pk:
            self.fields["slug"].disabled = True
            self.fields["slug"].help_text = "The slug names the content file and URL; it is fixed once created."
            if not isinstance(self.initial.get("prerequisites"), str):  # a draft's, given as text, stays
                self.initial["prerequisites"] = ", ".join(self.instance.prerequisites)

    def clean_prerequisites(self) -> list[str]:
        raw = self.cleaned_data.get("prerequisites") or ""
        slugs = [s.strip() for s in raw.replace("\n", ",").split(",") if s.strip()]
        bad = [s for s in slugs if not SLUG_RE.match(s)]
        if bad:
            raise forms.ValidationError(f"Not a slug: {', '.join(bad)}")
        unknown = sorted(set(slugs) - set(Module.objects.filter(slug__in=slugs).values_list("slug", flat=True)))
        if unknown:
            raise forms.ValidationError(f"No module with slug: {', '.join(unknown)}")
        if self.instance.slug and self.instance.slug in slugs:
            raise forms.ValidationError("A module cannot be its own prerequisite.")
        if self.instance.pk:
            graph = dict(Module.objects.values_list("slug", "prerequisites"))
            graph[self.instance.slug] = slugs
            cycle = prerequisite_cycle(graph, self.instance.slug)
            if cycle:
                raise forms.ValidationError(f"These prerequisites form a cycle: {' → '.join(cycle)}.")
        return slugs

    def clean_order(self) -> int:
        """Within what the content files accept (and PostgreSQL stores), so an export loads again."""
        order = self.cleaned_data["order"]
        if not -MAX_ORDER <= order <= MAX_ORDER:
            raise forms.ValidationError(f"Use a number between {-MAX_ORDER} and {MAX_ORDER}.")
        return order

    def clean_summary(self) -> str:
        """One line, as in the front matter (a pasted line break would not survive export)."""
        return " ".join((self.cleaned_data.get("summary") or "").split())

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if not SLUG_RE.match(slug):
            raise forms.ValidationError("Use lowercase letters, digits and single hyphens, e.g. kv-cache.")
        if not self.instance.pk and Module.all_objects.filter(slug=slug, deleted_at__isnull=False).exists():
            raise forms.ValidationError("A deleted module has this slug: undo its delete (under “Deleted modules” "
                                        "on the authoring page), or choose another slug.")
        return slug

    def clean_source(self) -> str:
        source = normalize_newlines(self.cleaned_data.get("source") or "")  # browsers post CRLF
        try:
            # The quiz ids a question or choice lacks are written into the saved text, so they persist.
            source, self.rendered = with_stable_ids(source, render_markdown(source), render_markdown)
        except ContentError as exc:
            if exc.line:  # the editor marks the line in its gutter (static/js/authoring.js)
                self.fields["source"].widget.attrs["data-error-line"] = exc.line
            raise forms.ValidationError(f"Line {exc.line}: {exc.message}" if exc.line else exc.message) from None
        return source

    def front_matter(self) -> dict:
        data = self.cleaned_data
        return {
            "title": data["title"], "short_title": data.get("short_title", ""),
            "slug": data["slug"] if not self.instance.pk else self.instance.slug,
            "track": data["track"].slug, "order": data["order"],
            "prerequisites": data["prerequisites"], "summary": data.get("summary", ""),
            "draft": self.instance.draft if self.instance.pk else True,
        }
