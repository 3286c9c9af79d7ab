"""Settings for Inference Lab, read from the environment (12-factor).

Every knob a deployment changes is an environment variable, read here once through inferencelab/env.py (one
parser per type, one true/false parser); the code reads `django.conf.settings`, never the environment. The
defaults give a working single-machine setup (SQLite, Redis on the project port started by `make run`).
"""
from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from inference_core import DEFAULT_MODEL

from .env import env_bool, env_float, env_int, env_list, env_str
from .redis_auth import local_url as local_redis_url
from .secret_key import secret_key

BASE_DIR = Path(__file__).resolve().parent.parent


# Off unless a developer opts in: a debug page shows settings, the URLconf and tracebacks to anyone.
DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = secret_key(BASE_DIR / "var" / "secret_key", env_str("DJANGO_SECRET_KEY", ""))
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "simple_history",
    "axes",  # the login throttle (inferencelab/login_throttle.py)
    "courseapp",  # the course: content models, rendering, lessons, quizzes, progress
    "authoring",
    "narration",
    "search",
    "demos",
    "labs",  # a lesson's labs: configurations run live, the student's table, graded questions
    "serverprofile",
    "classes",
    "exercises",  # code exercises run in a sandbox on the `cpu` workers (exercises/sandbox.py)
    "lti.apps.PlatformRegistrationsConfig",  # LTI platform registrations and the tool's key (docs/lti.md)
    "lti",
    "openai_api",  # the OpenAI-compatible API on the demos' batching service (docs/openai-api.md)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "lti.framing.LaunchFrameMiddleware",  # outside the session/CSRF/clickjacking layers: sees what they set
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",  # a revision's author is the request's user
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "inferencelab.security.ContentSecurityPolicyMiddleware",
    "axes.middleware.AxesMiddleware",  # turns a locked-out sign-in into the 429 page
]
# django-axes first: it refuses a locked (account, address) pair before any password is checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]

ROOT_URLCONF = "inferencelab.urls"
# Module revisions are restored from the authoring page, which re-renders the lesson and checks it like a save;
# the admin's revert would copy the text back without its HTML, cues and quiz rows.
SIMPLE_HISTORY_REVERT_DISABLED = True

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = None
ASGI_APPLICATION = "inferencelab.asgi.application"

(BASE_DIR / "var").mkdir(exist_ok=True)  # SQLite files, test databases, Redis working dir
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}", conn_max_age=60
    )
}


def private_sqlite_file(name: str) -> None:
    """The SQLite file holds password hashes and live sessions: owner-only (0600). Created so when missing, so
    no umask ever makes it world-readable; an existing file is narrowed. SQLite gives its -wal and -shm files the
    database file's mode."""
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    private_sqlite_file(str(DATABASES["default"]["NAME"]))
    # Celery threads and Daphne write concurrently: wait for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # WAL lets the worker append events while Daphne reads them; IMMEDIATE avoids lock-upgrade deadlocks.
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    # Tests start a real Celery worker in another process: the test database must be a file it can open.
    # One file per test process: several test runs may share a checkout.
    DATABASES["default"]["TEST"] = {
        "NAME": env_str("DJANGO_TEST_DB", str(BASE_DIR / "var" / f"test_db_{os.getpid()}.sqlite3"))
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# --- Transport security: on behind HTTPS (DJANGO_HTTPS=1), off for `make run` on plain http://127.0.0.1 --------
HTTPS = env_bool("DJANGO_HTTPS", False)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", HTTPS)
if env_bool("DJANGO_BEHIND_PROXY", False):  # the proxy terminates TLS and says so in this header
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Scripts only from this origin (no inline script, no eval): a stored <script> in any page cannot run.
# Styles allow inline because Plotly styles its SVG through style attributes.
CONTENT_SECURITY_POLICY = env_str("DJANGO_CSP", "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data: blob:",
    "media-src 'self' blob:", "font-src 'self' data:", "connect-src 'self'", "object-src 'none'",
    "base-uri 'self'", "form-action 'self'", "frame-ancestors 'none'",
]))

# --- Request limits (enforced at the socket by inferencelab/server.py, again by Django) ----------------------------
REQUEST_MAX_BODY_BYTES = env_int("REQUEST_MAX_BODY_BYTES", 1024 * 1024)
UPLOAD_MAX_BODY_BYTES = env_int("UPLOAD_MAX_BODY_BYTES", 210 * 1024 * 1024)  # a 200 MB narration + its cues
# The course zip import rides on the upload cap at the socket; its view caps it at COURSE_IMPORT_MAX_BYTES.
# (The admin's narration form has no file fields: audio is uploaded on the authoring page only.)
UPLOAD_BODY_PATHS = [r"^/author/[-\w]+/narration/upload/$", r"^/author/import/$"]
# A body over REQUEST_MAX_BODY_BYTES on those paths is read only from a session whose user has this permission
# (checked at the socket before the body is read: inferencelab/upload_guard.py); anyone else gets 403 at once.
UPLOAD_BODY_PERMISSION = "courseapp.instructor"
REQUEST_HEADER_TIMEOUT = env_float("REQUEST_HEADER_TIMEOUT", 10.0)
REQUEST_BODY_TIMEOUT = env_float("REQUEST_BODY_TIMEOUT", 60.0)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_MAX_BODY_BYTES  # non-file form data Django will hold in memory
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # larger uploaded files stream to a temporary file
NARRATION_MAX_AUDIO_BYTES = env_int("NARRATION_MAX_AUDIO_BYTES", 200 * 1024 * 1024)
COURSE_IMPORT_MAX_BYTES = env_int("COURSE_IMPORT_MAX_BYTES", 5 * 1024 * 1024)  # a course zip (author/import/)
# Reverse proxies in front of Daphne that append the client's address to X-Forwarded-For (inferencelab/
# client_address.py): 0 = Daphne faces the clients and the header is ignored.
TRUSTED_PROXIES = env_int("TRUSTED_PROXIES", 0)
# Login (django-axes, inferencelab/login_throttle.py): growing delays per (account, client address) pair. Its
# LOGIN_MAX_FAILURES-th failure locks that pair (only that pair) for LOGIN_LOCKOUT_SECONDS, each further failure
# twice as long as the last, at most LOGIN_LOCKOUT_MAX_SECONDS; failures are remembered LOGIN_FAILURE_MEMORY
# seconds after the pair's latest (and forgotten at a correct sign-in).
LOGIN_MAX_FAILURES = env_int("LOGIN_MAX_FAILURES", 5)
LOGIN_LOCKOUT_SECONDS = env_int("LOGIN_LOCKOUT_SECONDS", 60)
LOGIN_LOCKOUT_MAX_SECONDS = env_int("LOGIN_LOCKOUT_MAX_SECONDS", 86400)
LOGIN_FAILURE_MEMORY = env_int("LOGIN_FAILURE_MEMORY", 86400)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = "inferencelab.login_throttle.failure_limit"
AXES_COOLOFF_TIME = "inferencelab.login_throttle.cool_off"
AXES_CLIENT_IP_CALLABLE = "inferencelab.client_address.for_request"
AXES_LOCKOUT_CALLABLE = "inferencelab.login_throttle.lockout_response"
AXES_RESET_ON_SUCCESS = True  # a correct password forgives its own pair's failures
# Attempts while locked are refused unchecked and count nothing: retrying the right password during a lock
# never makes the next one longer.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_DISABLE_ACCESS_LOG = True  # successful sign-ins are not logged with their address
AXES_VERBOSE = False
# Sign-up: at most this many new accounts per client address per SIGNUP_WINDOW seconds, then 429.
SIGNUP_MAX_PER_ADDRESS = env_int("SIGNUP_MAX_PER_ADDRESS", 5)
SIGNUP_WINDOW = env_int("SIGNUP_WINDOW", 3600)
# Anonymous visitors' sessions (made at a visitor's first run): a school's NAT starts a class or two within
# minutes; past this many per address per window, the page runs on its cookie-less socket (the address ceiling).
VISITOR_SESSIONS_PER_ADDRESS = env_int("VISITOR_SESSIONS_PER_ADDRESS", 240)
VISITOR_SESSION_WINDOW = env_int("VISITOR_SESSION_WINDOW", 600)
# Password-reset requests per address per window, then 429 (whatever the address typed: nothing tells whether
# an account has that e-mail).
PASSWORD_RESETS_PER_ADDRESS = env_int("PASSWORD_RESETS_PER_ADDRESS", 20)
PASSWORD_RESET_WINDOW = env_int("PASSWORD_RESET_WINDOW", 3600)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "inferencelab.staticfinders.PlotlyBundleFinder",  # /static/vendor/plotly.min.js, from the plotly package
]
MEDIA_URL = "/media/"
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(BASE_DIR / "var" / "media")))
# Uploaded course zips wait here for the instructor to confirm them: outside MEDIA_ROOT, which a web server may
# serve as it is.
COURSE_IMPORT_PENDING_DIR = Path(env_str("COURSE_IMPORT_PENDING_DIR", str(BASE_DIR / "var" / "pending-imports")))
# Behind nginx (docs/deploy.md): the prefix of its `internal` location aliased to MEDIA_ROOT. The media views
# then only decide who may fetch a file and nginx sends it (inferencelab/media_accel.py); empty: they send it.
MEDIA_ACCEL_REDIRECT = env_str("MEDIA_ACCEL_REDIRECT", "")
WHITENOISE_USE_FINDERS = True

# --- Redis, Channels, Celery -------------------------------------------------------------
# An explicit REDIS_URL wins; else the Redis `make run` starts, with this install's password (var/redis_password).
REDIS_URL = env_str("REDIS_URL", "") or local_redis_url(env_int("REDIS_PORT", 6390))

# The pub/sub layer keeps no idle sockets to time out (django/channels_redis#422).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = "cpu"
# The queue demo runs go to: one per accelerator type (e.g. DEMO_TASK_QUEUE=gpu-h100 on the Daphne processes that
# serve those students, `-Q gpu-h100` on the workers of those machines). A worker takes runs only from the fair
# lists of the queue its ticket came through, so a run always lands on a worker of its route.
DEMO_TASK_QUEUE = env_str("DEMO_TASK_QUEUE", "gpu")
CELERY_TASK_ROUTES = {
    "demos.tasks.run_demo": {"queue": DEMO_TASK_QUEUE},  # demos.admission.RUN_DEMO_TASK (workers/tasks.py runs it)
}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# With late acks a task stays in Redis's `unacked` hash until its worker acks it; one whose worker was SIGKILLed is
# put back in its queue only once the broker's visibility timeout has passed since its delivery (kombu's default:
# an hour), by the sweep every worker runs every `unacked_restore_interval` seconds and at its start. Kombu cannot
# tell a dead worker's task from a live one's, so the timeout must outlast the longest task this broker carries, or
# a live one is delivered a second time: a narration synthesis (minutes on two shared cores) or a demo run with its
# comparison (two to three minutes with a full batch of 16 there). Ten minutes covers both with margin. A demo
# ticket delivered twice would be harmless anyway: a run is claimed once (workers/run.py), so the copy
# takes the next fair run or skips.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 600),
    "unacked_restore_interval": 10,
    "unacked_restore_throttle": 1,  # sweep on every interval (kombu's default scans on every 10th: ~100 s)
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# kombu's Redis transport, whose channels survive their connection's teardown: without it a worker with a run in
# flight exits (status 1) when Redis restarts, after waiting for its runs (inferencelab/broker.py says why).
CELERY_BROKER_TRANSPORT = "inferencelab.broker:Transport"

# LTI grades (lti/scores.py): each post is a job on the `cpu` queue; a platform that does not accept it is tried
# again after LTI_SCORE_RETRY_BASE seconds, doubled each try up to LTI_SCORE_RETRY_CAP, by the sweep every `cpu`
# worker runs every LTI_SCORE_SWEEP_INTERVAL seconds (it also sends a post whose job has waited
# LTI_SCORE_QUEUE_GRACE seconds in the queue); after LTI_SCORE_MAX_TRIES tries (about 38 h) the post is `failed`.
LTI_SCORE_RETRY_BASE = env_float("LTI_SCORE_RETRY_BASE", 30.0)
LTI_SCORE_RETRY_CAP = env_float("LTI_SCORE_RETRY_CAP", 6 * 3600.0)
LTI_SCORE_MAX_TRIES = env_int("LTI_SCORE_MAX_TRIES", 16)
LTI_SCORE_SWEEP_INTERVAL = env_float("LTI_SCORE_SWEEP_INTERVAL", 15.0)
LTI_SCORE_QUEUE_GRACE = env_float("LTI_SCORE_QUEUE_GRACE", 60.0)
# The LMS class lists (lti/roster.py): the same worker reads each every LTI_ROSTER_SYNC_EVERY seconds (again after
# LTI_ROSTER_RETRY when it could not), looking for due ones every LTI_ROSTER_SWEEP_INTERVAL seconds.
LTI_ROSTER_SYNC_EVERY = env_float("LTI_ROSTER_SYNC_EVERY", 6 * 3600.0)
LTI_ROSTER_RETRY = env_float("LTI_ROSTER_RETRY", 600.0)
LTI_ROSTER_SWEEP_INTERVAL = env_float("LTI_ROSTER_SWEEP_INTERVAL", 60.0)

# How long a thread may keep the GIL while another waits for it (Python's default: 5 ms), in the worker and in
# Daphne. A worker's publishing threads share one GIL with the engine's Python-heavy threads (a batched step, a
# run's comparison, 16 runs' database writes), and Daphne's event loop with its database threads: measured here, a
# message into a process whose other thread runs Python waited 12-13 ms (median) at 5 ms and 5 ms at 1 ms.
GIL_SWITCH_INTERVAL = env_float("GIL_SWITCH_INTERVAL", 0.001)

# --- Engine and demo limits ---------------------------------------------------------------
ENGINE_MODEL = env_str("ENGINE_MODEL", DEFAULT_MODEL)
DEMO_MAX_PROMPT_TOKENS = env_int("DEMO_MAX_PROMPT_TOKENS", 512)
DEMO_MAX_NEW_TOKENS = env_int("DEMO_MAX_NEW_TOKENS", 128)
DEMO_MAX_MESSAGE_BYTES = env_int("DEMO_MAX_MESSAGE_BYTES", 16_384)
# Run limits and admission (demos/admission.py)
DEMO_MAX_CONCURRENT_RUNS = env_int("DEMO_MAX_CONCURRENT_RUNS", 2)  # queued + running runs per user/session
DEMO_RUNS_PER_MINUTE = env_int("DEMO_RUNS_PER_MINUTE", 12)  # started runs per user/session in any 60 s window
# Queued + running runs per client address (inferencelab/client_address.py; every address counts, loopback
# included), whoever started them: a ceiling, not a share of the worker slots (over those, runs queue; the queue
# serves each person in turn, demos/admission.py). Sized for a class of 60 behind one NAT, two runs each, so that
# sessions minted from one address buy no more than a class has.
DEMO_MAX_RUNS_PER_ADDRESS = env_int("DEMO_MAX_RUNS_PER_ADDRESS", 120)
DEMO_RUNS_PER_MINUTE_PER_ADDRESS = env_int("DEMO_RUNS_PER_MINUTE_PER_ADDRESS", 240)  # that class: 4 runs/min each
# Runs waiting for a worker, all visitors together; beyond: `busy`. Above two addresses' ceilings, so that no one
# address can fill the queue alone; DEMO_QUEUE_TIMEOUT bounds how long any of them waits.
DEMO_MAX_QUEUED = env_int("DEMO_MAX_QUEUED", 250)
# Worker slots (runs the workers can run at once); 0 = the sum the live workers report (their -c). A start
# runs live while fewer real runs than this are queued or running; otherwise a stored run may be replayed.
DEMO_WORKER_SLOTS = env_int("DEMO_WORKER_SLOTS", 0)
DEMO_REPLAY_CACHE = env_bool("DEMO_REPLAY_CACHE", True)  # a stored identical run may be replayed (asked, or busy)
DEMO_REPLAY_SPEED = env_float("DEMO_REPLAY_SPEED", 1.0)  # 1.0 = paced like the original run
# Sockets
DEMO_DASHBOARD_SOCKETS_PER_ADDRESS = env_int("DEMO_DASHBOARD_SOCKETS_PER_ADDRESS", 4)  # per Daphne process
DEMO_MESSAGE_RATE = env_float("DEMO_MESSAGE_RATE", 20.0)  # messages per second one socket may send (sustained)…
DEMO_MESSAGE_BURST = env_float("DEMO_MESSAGE_BURST", 60.0)  # …and in a burst; beyond that each gets `slow_down`
DEMO_STALL_SECONDS = env_float("DEMO_STALL_SECONDS", 3.0)  # quiet this long → the consumer checks the run's state
# Run sockets per Daphne process (demos/consumers/sockets.py), refused beyond with close code 4429: per visitor
# (a user, a session, or every cookie-less socket of one address, which is one visitor) and per client address,
# sessions included (a class of 60 behind one NAT with a few tabs each). Issue 38: one visitor held 1,500.
DEMO_SOCKETS_PER_VISITOR = env_int("DEMO_SOCKETS_PER_VISITOR", 8)
DEMO_SOCKETS_PER_ADDRESS = env_int("DEMO_SOCKETS_PER_ADDRESS", 256)
# A run socket with no run and no message but `ping` for this long is closed (code 4408); the page reopens it at
# its next run. An open tab's keep-alive pings do not count: a forgotten tab holds nothing. 0: never.
DEMO_IDLE_SOCKET_SECONDS = env_float("DEMO_IDLE_SOCKET_SECONDS", 600.0)
DEMO_STATS_INTERVAL = env_float("DEMO_STATS_INTERVAL", 1.0)  # worker stats and dashboard refresh period
# Worker liveness (workers/heartbeat.py) and the web side's reaper (demos/reaper.py)
DEMO_REAPER_INTERVAL = env_float("DEMO_REAPER_INTERVAL", 5.0)  # how often the server looks for runs whose worker died
DEMO_HEARTBEAT_INTERVAL = env_float("DEMO_HEARTBEAT_INTERVAL", 1.0)  # the worker refreshes a run's heartbeat this often
DEMO_HEARTBEAT_TTL = env_float("DEMO_HEARTBEAT_TTL", 4.0)  # a heartbeat key expires this long after its last refresh…
# …and a run is failed (`worker_lost`) once it has been missing this long while Redis answered promptly:
# a Redis pause or restart (no heartbeat can be written then) never fails a healthy run.
DEMO_HEARTBEAT_GRACE = env_float("DEMO_HEARTBEAT_GRACE", 2.0)
DEMO_QUEUE_TIMEOUT = env_float("DEMO_QUEUE_TIMEOUT", 300.0)  # queued this long without a worker → error
DEMO_ORPHAN_GRACE = env_float("DEMO_ORPHAN_GRACE", 15.0)  # a run whose socket closed is cancelled unless resumed
# The machine profile a demo worker measures while idle (workers/machine_profile.py)
MACHINE_PROFILE = env_bool("MACHINE_PROFILE", True)  # off: never measured
MACHINE_PROFILE_QUICK = env_bool("MACHINE_PROFILE_QUICK", False)  # smaller, fewer measurements: the tests' setting
MACHINE_PROFILE_REPEATS = env_int("MACHINE_PROFILE_REPEATS", 5)
MACHINE_PROFILE_MAX_AGE_H = env_float("MACHINE_PROFILE_MAX_AGE_H", 24.0)  # measured again once this old

CONTENT_DIR = Path(env_str("CONTENT_DIR", str(BASE_DIR / "content")))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"axes": {"level": "WARNING"}},  # a line per sign-in otherwise; failures and lockouts still show
}
