"""Names and Role Provisioning: an instructor's launch fills the cohort from the LMS's membership service
(paged, over HTTP, behind a token the platform grants against the tool's key)."""
from __future__ import annotations

from django.contrib.auth.models import User
from lti_platform import INSTRUCTOR, LEARNER, launch

from classes.models import Cohort, Enrollment
from lti.models import Identity

MENTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"


def _member(user_id, role, status="Active"):
    return {"user_id": user_id, "roles": [role], "status": status, "given_name": user_id.title(),
            "family_name": "Roster", "email": f"{user_id}@school.example"}


def test_an_instructor_launch_enrolls_the_lms_roster(client, course, platform):
    platform.roster = [
        [_member("r-1", LEARNER), _member("r-2", LEARNER), _member("co-teacher", INSTRUCTOR)],
        [_member("r-3", LEARNER), _member("r-gone", LEARNER, status="Inactive"), _member("parent", MENTOR)],
    ]
    response = launch(client, platform, platform.resource_claims("teach-r", INSTRUCTOR, module="intro", nrps=True))
    assert response.status_code == 302
    cohort = Cohort.objects.get()
    enrolled = sorted(cohort.enrollments.values_list("user__lti_identities__subject", flat=True))
    assert enrolled == ["r-1", "r-2", "r-3"]
    assert sorted(cohort.instructors.values_list("lti_identities__subject", flat=True)) == ["co-teacher", "teach-r"]
    page = client.get(response["Location"]).content.decode()
    assert "Class list from the LMS: 3 students newly enrolled" in page

    # A rostered student's own launch finds the account made for them.
    client.logout()
    users = User.objects.count()
    launch(client, platform, platform.resource_claims("r-2", LEARNER, module="intro"))
    assert User.objects.count() == users
    assert Identity.objects.get(subject="r-2").user.email == "r-2@school.example"
    assert Enrollment.objects.filter(cohort=cohort).count() == 3


def test_a_roster_service_that_is_down_does_not_stop_the_launch(client, course, platform):
    platform.nrps_down = True
    response = launch(client, platform, platform.resource_claims("teach-r", INSTRUCTOR, module="intro", nrps=True))
    assert response.status_code == 302
    assert not Enrollment.objects.exists()
    assert "could not be fetched from the LMS" in client.get(response["Location"]).content.decode()
