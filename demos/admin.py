from django.contrib import admin

from .models import Run, RunEvent


class RunEventInline(admin.TabularInline):
    model = RunEvent
    extra = 0
    fields = ("seq", "type", "t", "event")
    readonly_fields = fields
    can_delete = False
    show_change_link = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "demo", "status", "owner", "worker", "n_events", "created_at", "finished_at")
    list_filter = ("demo", "status", "deterministic", "replay_reason", "device")
    search_fields = ("id", "share_id", "owner", "worker", "cache_key")
    readonly_fields = [f.name for f in Run._meta.fields]
    inlines = [RunEventInline]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ("run", "seq", "type", "t")
    list_filter = ("type",)
    readonly_fields = ("run", "seq", "type", "t", "event", "created_at")
