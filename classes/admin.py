from django.contrib import admin

from .models import Announcement, Cohort, DueDate, Enrollment


class EnrollmentInline(admin.TabularInline):
    model = Enrollment
    extra = 0
    raw_id_fields = ["user"]


class DueDateInline(admin.TabularInline):
    model = DueDate
    extra = 0


@admin.register(Cohort)
class CohortAdmin(admin.ModelAdmin):
    list_display = ["name", "invite_code", "joining_open", "created_at"]
    filter_horizontal = ["instructors"]
    inlines = [EnrollmentInline, DueDateInline]


@admin.register(Announcement)
class AnnouncementAdmin(admin.ModelAdmin):
    list_display = ["title", "cohort", "author", "created_at"]
    list_filter = ["cohort"]
