from django.urls import path

from . import dashboard, teacher_tools, views

app_name = "classes"

urlpatterns = [
    path("", views.home, name="home"),
    path("new/", views.cohort_create, name="cohort_create"),
    path("join/", views.join_by_code, name="join_by_code"),
    path("join/<str:code>/", views.join, name="join"),
    path("invitations/<int:invitation_id>/", views.invitation_answer, name="invitation_answer"),
    path("<int:cohort_id>/", views.cohort_detail, name="cohort"),
    path("<int:cohort_id>/students/import/", views.roster_import, name="roster_import"),
    path("<int:cohort_id>/students/add/", views.student_add, name="student_add"),
    path("<int:cohort_id>/students/set-password-links.csv", views.password_links_csv, name="password_links_csv"),
    path("<int:cohort_id>/students/<int:user_id>/", views.student_detail, name="student"),
    path("<int:cohort_id>/students/<int:user_id>/remove/", views.student_remove, name="student_remove"),
    path("<int:cohort_id>/settings/", teacher_tools.cohort_settings, name="cohort_settings"),
    path("<int:cohort_id>/students/<int:user_id>/details/", teacher_tools.student_details, name="student_details"),
    path("<int:cohort_id>/students/<int:user_id>/password-link/", teacher_tools.password_link,
         name="student_password_link"),
    path("<int:cohort_id>/students/<int:user_id>/extensions/", teacher_tools.extension_set, name="extension_set"),
    path("<int:cohort_id>/students/<int:user_id>/extensions/<int:extension_id>/remove/",
         teacher_tools.extension_remove, name="extension_remove"),
    path("<int:cohort_id>/invite/", views.invite_reset, name="invite_reset"),
    path("<int:cohort_id>/invitations/<int:invitation_id>/withdraw/", views.invitation_withdraw,
         name="invitation_withdraw"),
    path("<int:cohort_id>/instructors/", views.instructor_add, name="instructor_add"),
    path("<int:cohort_id>/instructors/<int:user_id>/remove/", views.instructor_remove, name="instructor_remove"),
    path("<int:cohort_id>/due-dates/", views.due_date_set, name="due_date_set"),
    path("<int:cohort_id>/due-dates/<int:due_id>/remove/", views.due_date_remove, name="due_date_remove"),
    path("<int:cohort_id>/announcements/", views.announcement_create, name="announcement_create"),
    path("<int:cohort_id>/announcements/<int:announcement_id>/delete/", views.announcement_delete,
         name="announcement_delete"),
    path("<int:cohort_id>/gradebook/", views.gradebook, name="gradebook"),
    path("<int:cohort_id>/gradebook.csv", views.gradebook_csv, name="gradebook_csv"),
    path("<int:cohort_id>/modules/<slug:slug>/figures/", dashboard.cohort_module_dashboard, name="module_figures"),
    path("<int:cohort_id>/modules/<slug:slug>/figures.csv", dashboard.cohort_module_dashboard_csv,
         name="module_figures_csv"),
    # A module's dashboard over everyone who used it (instructors; linked from the authoring list).
    path("modules/<slug:slug>/", dashboard.module_dashboard, name="module_dashboard"),
    path("modules/<slug:slug>/class.csv", dashboard.module_dashboard_csv, name="module_dashboard_csv"),
]
