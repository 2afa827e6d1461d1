"""Settings for Switchyard: the only module that reads os.environ.

Every knob is documented in docs/production/configuration.md and in `.env.example`; the
generated reference (docs/gen_reference.py) reads the comments beside each `env_*` call.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TypedDict
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from workflows.core import egress

BASE_DIR = Path(__file__).resolve().parent.parent
DEV_SECRET_KEY = "dev-insecure-switchyard-key-change-me"


def env_str(name: str, default: str | None = None) -> str:
    """Return an environment variable, or the default; raise if neither exists."""
    value = os.environ.get(name, default)
    if value is None:
        raise ImproperlyConfigured(f"Set the environment variable {name}.")
    return value


def env_int(name: str, default: int) -> int:
    """Return an integer environment variable, with a clear error on junk."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}.") from None


def env_float(name: str, default: float) -> float:
    """Return a float environment variable, with a clear error on junk."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}.") from None


def mcp_stdio_commands(raw: str) -> dict[str, list[str]]:
    """Parse SWITCHYARD_MCP_STDIO_COMMANDS: a JSON object, name -> argv (a non-empty list of strings)."""
    if not raw.strip():
        return {}
    try:
        found = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"SWITCHYARD_MCP_STDIO_COMMANDS must be a JSON object: {exc}") from None
    if not isinstance(found, dict) or not all(
        isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) for argv in found.values()
    ):
        raise ImproperlyConfigured(
            'SWITCHYARD_MCP_STDIO_COMMANDS must map names to argv lists: {"files": ["npx", "server"]}.'
        )
    return {str(name): list(argv) for name, argv in found.items()}


def egress_allow(raw: str) -> list[str]:
    """Return the egress allow-list entries, refusing to start on one that is not a host or network."""
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    try:
        egress.parse_allow(entries)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    return entries


def env_bool(name: str, default: bool) -> bool:
    """Return a boolean environment variable (1/0, true/false, yes/no, on/off)."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}.")


def database_from_url(url: str) -> dict[str, object]:
    """Turn postgres://user:pass@host:port/name?sslmode=... into a Django DATABASES entry.

    The query string's parameters are libpq's own (sslmode, sslrootcert, sslcert, sslkey,
    application_name, target_session_attrs, ...) and go to the connection unchanged: libpq
    refuses one it does not know, so a misspelt parameter stops the process instead of being
    dropped. User and password are percent-decoded, as libpq decodes them.
    """
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgres:// URL, got {url!r}.")
    options: dict[str, object] = {
        "connect_timeout": 5,
        # Server-side binding lets psycopg prepare a statement run five times on a connection:
        # parsed once per connection; workers and schedulers also keep its plan (generic plans,
        # workflows/runtime/pgsession.py), since planning cost more than running their claims.
        # DB_PREPARE_THRESHOLD=0 turns preparing off (a pooler that cannot keep them).
        "server_side_binding": True,
        "prepare_threshold": env_int("DB_PREPARE_THRESHOLD", 5) or None,
    }
    options.update(parse_qsl(parts.query, keep_blank_values=True))
    idle = env_int("DB_IDLE_IN_TRANSACTION_SECONDS", 60)
    if idle < 0:
        raise ImproperlyConfigured(f"DB_IDLE_IN_TRANSACTION_SECONDS must be 0 (off) or more, got {idle}.")
    if idle:
        # A process cut off from PostgreSQL inside a transaction (a network partition, a
        # frozen VM) would keep that transaction's locks for as long as its connection looks
        # alive, hours, and every scheduler that reaches for one of them waits as long.
        # PostgreSQL ends such a session instead; no transaction of ours waits on the network.
        ours = f"-c idle_in_transaction_session_timeout={idle * 1000}"
        options["options"] = f"{ours} {options['options']}" if options.get("options") else ours
    pool_size = env_int("DB_POOL_SIZE", 0)
    if pool_size < 0:
        raise ImproperlyConfigured(f"DB_POOL_SIZE must be 0 (no pool) or more, got {pool_size}.")
    if pool_size:
        options["pool"] = pool_options(pool_size)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "switchyard",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": unquote(parts.hostname or ""),
        "PORT": str(parts.port or ""),
        # 0: Daphne runs each request in a thread of its own; kept connections would exhaust
        # Postgres (a web process pools them instead: DB_POOL_SIZE). Workers and schedulers
        # keep theirs anyway (no request boundaries).
        "CONN_MAX_AGE": env_int("DB_CONN_MAX_AGE", 0),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": options,
    }


def pool_options(size: int) -> dict[str, object]:
    """Django's psycopg pool for a web process: at most `size` connections, kept between requests.

    Without it each request connects anew: a new PostgreSQL backend, whose catalog caches
    start cold, for every request. A request that finds every connection taken waits up to
    10 s for one (then a 500 names the pool). With CONN_HEALTH_CHECKS, Django has the pool
    check each connection it hands out (an empty statement): after a PostgreSQL restart the
    kept ones are replaced, not served.
    """
    return {"min_size": min(2, size), "max_size": size, "timeout": 10}


def checked_redis_url(url: str) -> str:
    """Return REDIS_URL if redis-py, RQ and channels-redis can all use it; raise otherwise.

    All three build their clients with redis-py's `from_url`, so `rediss://` (TLS) works
    everywhere, with its query parameters (ssl_ca_certs, ssl_cert_reqs, ...) passed through.
    """
    if urlsplit(url).scheme not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured(
            f"REDIS_URL must be a redis://, rediss:// (TLS) or unix:// URL, got {url!r}."
        )
    return url


def production_problems(environ: dict[str, str], dev_secret_key: str) -> list[str]:
    """Return what a production process lacks, one phrase per setting (empty: nothing).

    Production refuses to start on these rather than warn: a default secret key signs
    sessions anyone can forge, a missing host list answers every Host header, an open
    or absent metrics token either leaks the metrics or leaves the scraper locked out, and
    without a secrets key every node that names a `{secret.NAME}` fails at run time.
    """
    problems = []
    secret = environ.get("SECRET_KEY", "")
    if not secret:
        problems.append("SECRET_KEY is not set")
    elif secret == dev_secret_key or len(secret) < 50 or len(set(secret)) < 5:
        problems.append("SECRET_KEY is the development key or too weak (50+ random characters)")
    if not [h for h in environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]:
        problems.append("ALLOWED_HOSTS is not set (the host names this site answers to)")
    if not environ.get("SWITCHYARD_METRICS_TOKEN", ""):
        problems.append("SWITCHYARD_METRICS_TOKEN is not set (the bearer token /metrics accepts)")
    if not environ.get("SWITCHYARD_SECRETS_KEY", "").strip(" ,"):
        problems.append(
            "SWITCHYARD_SECRETS_KEY is not set (the key that seals the secrets store; "
            "`manage.py secrets genkey` prints one)"
        )
    if environ.get("DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}:
        problems.append("DEBUG is on")
    return problems


# development (the default) or production: production refuses to start without a secret key,
# allowed hosts, a metrics token and a secrets key, and turns on secure cookies, HSTS and the HTTPS redirect.
SWITCHYARD_ENV = env_str("SWITCHYARD_ENV", "development")
if SWITCHYARD_ENV not in {"development", "production"}:
    raise ImproperlyConfigured(f"SWITCHYARD_ENV must be development or production, got {SWITCHYARD_ENV!r}.")
PRODUCTION = SWITCHYARD_ENV == "production"
if PRODUCTION and (missing := production_problems(dict(os.environ), DEV_SECRET_KEY)):
    raise ImproperlyConfigured(
        "SWITCHYARD_ENV=production refuses to start: "
        + "; ".join(missing)
        + ". See docs/production/guide.md."
    )

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", DEV_SECRET_KEY)
ALLOWED_HOSTS = [h for h in env_str("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]

# Daphne's app gives `manage.py runserver` Daphne in place of Django's WSGI server, and nothing
# else: its import installs Twisted's reactor, 0.3-0.5 s of CPU at the start of every process
# that sets Django up (each worker and scheduler, the tests). So only runserver loads it. The
# web process of `make run` and systemd is Daphne itself (controlplane/webserver.py), which
# imports daphne.server before anything else.
RUNSERVER = sys.argv[1:2] == ["runserver"]
INSTALLED_APPS = [
    *(["daphne"] if RUNSERVER else []),  # before staticfiles, whose runserver it replaces
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rq",
    "django_htmx",
    "ninja",  # django-ninja: its Swagger UI assets and templates, served locally (no CDN)
    "channels",
    "workflows",
    "monitoring",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every response, in development too, so that the browser
    # tests see what production serves.
    "controlplane.csp.ContentSecurityPolicy",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # After CSRF (see its process_view), and last: sync-only and innermost, it keeps the whole
    # chain synchronous under ASGI (one thread hop in, one to the view) instead of the
    # async middleware above it each hopping to a thread for its process_request and
    # process_response (Django's MiddlewareMixin in async mode).
    "controlplane.textguard.RefuseUnstorableText",
]

ROOT_URLCONF = "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"
WSGI_APPLICATION = None

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
                "monitoring.views.inbox.inbox_nav",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", "postgres://switchyard@127.0.0.1:5432/switchyard")
DATABASES = {"default": database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = checked_redis_url(env_str("REDIS_URL", "redis://127.0.0.1:6379/0"))

# The queues a node may name; workers listen on these (in this order of priority).
SWITCHYARD_QUEUES = [q for q in env_str("SWITCHYARD_QUEUES", "default,agents").split(",") if q]
# Each queue has an urgent lane, `<queue>-urgent`, for the jobs of runs above priority 0
# (workflows/core/priorities.py); workers take it first.
RQ_QUEUES = {
    name: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": -1}
    for name in [f"{q}-urgent" for q in SWITCHYARD_QUEUES] + SWITCHYARD_QUEUES
}
# Workers are NodeWorker (non-forking, heartbeating); see workflows/runtime/worker.py.
RQ = {"COMMIT_MODE": "auto", "WORKER_CLASS": "workflows.runtime.worker.NodeWorker"}

# channels-redis's list-based layer. Its pub/sub layer (one copy per Daphne process instead of
# one per consumer, half of Daphne's CPU with fifty dashboards) was tried and dropped: under
# redis-py 8 a consumer's subscribe raced the shared receive loop ("Timeout reading from"),
# the consumer died, and a change message was lost (a browser test failed 1 run in 5).
# A consumer waits for its next message with BZPOPMIN for 5 s (channels-redis's brpop_timeout),
# and redis-py 8 reads with a 5 s socket timeout by default: a websocket on a quiet topic then
# died with "Timeout reading from" after 5 s. Reads may take up to 15 s here; a Redis that is
# really gone is still noticed. Streamed LLM text (the `llm:` topics) does not travel through
# this layer: one pub/sub subscriber per Daphne process (monitoring/services/livefeed.py).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}]},
    }
}


class SwitchyardSettings(TypedDict):
    """The keys of SWITCHYARD and their types (mypy reads settings.SWITCHYARD["..."] through it)."""

    HANDLER_MODULES: list[str]
    MAX_INPUT_BYTES: int
    MAX_OUTPUT_BYTES: int
    MAX_MAP_OUTPUT_BYTES: int
    MAX_NODES: int
    START_BURST_GAP_SECONDS: float
    RECONCILE_AFTER_SECONDS: float
    WORKER_HEARTBEAT_SECONDS: float
    WORKER_LOST_AFTER_SECONDS: float
    FREE_LOST_ATTEMPTS: int
    WORKER_DRAIN_SECONDS: float
    WORKER_SLOTS: int
    WORKER_SLOT_CONNECTIONS: int
    HTTP_TIMEOUT_SECONDS: float
    HTTP_MAX_RESPONSE_BYTES: int
    LLM_BASE_URL: str
    LLM_API_KEY: str
    LLM_MODEL: str
    DEMO_LLM_URL: str
    EGRESS_ALLOW: list[str]
    API_RATE_LIMIT_PER_MINUTE: int
    EVENT_RETENTION_SECONDS: int
    RETENTION_DAYS: float
    DECISION_LINK_SECONDS: int
    WEBHOOK_TOLERANCE_SECONDS: int
    WEBHOOK_TIMEOUT_SECONDS: float
    WEBHOOK_MAX_ATTEMPTS: int
    CHILD_DEPTH_LIMIT: int
    WEBHOOK_BACKOFF_SECONDS: float
    BUDGET_OUTPUT_TOKENS: int
    PROVIDER_RATE_WINDOW_SECONDS: float
    SECRETS_KEY: str
    MCP_WAIT_SECONDS: float
    MCP_MAX_WAIT_SECONDS: float
    MCP_STDIO_COMMANDS: dict[str, list[str]]
    MCP_TOOLS_TTL_SECONDS: float
    MCP_MAX_RESULT_BYTES: int


SWITCHYARD: SwitchyardSettings = {
    # Modules whose import registers node handlers (the only code a definition may name).
    "HANDLER_MODULES": [
        m
        for m in env_str(
            "SWITCHYARD_HANDLER_MODULES", "workflows.handlers.builtin,workflows.handlers.demo"
        ).split(",")
        if m
    ],
    "MAX_INPUT_BYTES": env_int("SWITCHYARD_MAX_INPUT_BYTES", 256 * 1024),
    "MAX_OUTPUT_BYTES": env_int("SWITCHYARD_MAX_OUTPUT_BYTES", 256 * 1024),
    # A map node's output: its items' outputs in one list (up to 10,000 of them).
    "MAX_MAP_OUTPUT_BYTES": env_int("SWITCHYARD_MAX_MAP_OUTPUT_BYTES", 16 * 1024 * 1024),
    "MAX_NODES": env_int("SWITCHYARD_MAX_NODES", 2000),
    # A start this soon after the previous one in the same process is part of a burst: its
    # roots go through a scheduler, which packs many runs' roots into few jobs (runs.py).
    "START_BURST_GAP_SECONDS": env_float("SWITCHYARD_START_BURST_GAP_SECONDS", 0.005),
    # Reconciler: how long a run may sit without progress before Postgres re-drives it.
    "RECONCILE_AFTER_SECONDS": env_float("SWITCHYARD_RECONCILE_AFTER_SECONDS", 3.0),
    "WORKER_HEARTBEAT_SECONDS": env_float("SWITCHYARD_WORKER_HEARTBEAT_SECONDS", 1.0),
    "WORKER_LOST_AFTER_SECONDS": env_float("SWITCHYARD_WORKER_LOST_AFTER_SECONDS", 5.0),
    # Attempts lost with their worker (SIGKILL, OOM, host gone, a drain's hand-back) are
    # retried without counting against the node's retry policy, this many times per node;
    # after that they count like failures, so a handler that kills its worker still ends dead.
    "FREE_LOST_ATTEMPTS": env_int("SWITCHYARD_FREE_LOST_ATTEMPTS", 3),
    # SIGTERM: a worker finishes its current job within this, else hands its attempts back.
    "WORKER_DRAIN_SECONDS": env_float("SWITCHYARD_WORKER_DRAIN_SECONDS", 5.0),
    # Attempts of I/O-bound nodes (llm.chat, llm.agent, http.request) one worker process runs
    # at once as coroutines (runtime/slots.py); 0 runs them one at a time like any handler.
    "WORKER_SLOTS": env_int("SWITCHYARD_WORKER_SLOTS", 100),
    # Threads (each with its own PostgreSQL connection) that run the statements of a worker's
    # slots (runtime/slots.py): one statement waiting on PostgreSQL no longer holds up the rest.
    # 8: a fleet of 1,000 agents ran at 1.53-1.56x the ideal with 8 or 16, 1.61x with 4, 1.81x with 2.
    "WORKER_SLOT_CONNECTIONS": env_int("SWITCHYARD_WORKER_SLOT_CONNECTIONS", 8),
    "HTTP_TIMEOUT_SECONDS": env_float("SWITCHYARD_HTTP_TIMEOUT_SECONDS", 30.0),
    "HTTP_MAX_RESPONSE_BYTES": env_int("SWITCHYARD_HTTP_MAX_RESPONSE_BYTES", 1024 * 1024),
    "LLM_BASE_URL": env_str("LLM_BASE_URL", "http://127.0.0.1:11434/v1"),
    "LLM_API_KEY": env_str("LLM_API_KEY", ""),
    "LLM_MODEL": env_str("LLM_MODEL", "gpt-4o-mini"),
    # Under a spend budget, the answer's bound of an LLM call whose node sets no max_tokens:
    # the call reserves it as its worst case and is sent with it (workflows/budgets).
    "BUDGET_OUTPUT_TOKENS": env_int("SWITCHYARD_BUDGET_OUTPUT_TOKENS", 4096),
    # The window LLM providers' requests- and tokens-per-minute limits are counted over
    # (workflows/providers_health/rates.py): a limit of R per minute admits R*W/60 per W s.
    "PROVIDER_RATE_WINDOW_SECONDS": env_float("SWITCHYARD_PROVIDER_RATE_WINDOW_SECONDS", 60.0),
    # Set by `make run` when it runs the scripted demo provider: bootstrap registers it as "demo".
    "DEMO_LLM_URL": env_str("SWITCHYARD_DEMO_LLM_URL", ""),
    # Egress: what http.request, webhooks and LLM providers may reach beyond the public internet
    # (loopback, private, link-local, metadata... are refused): host names, addresses or
    # networks, each with an optional port, comma-separated (`10.0.0.0/8,api.internal:8443`).
    "EGRESS_ALLOW": egress_allow(env_str("SWITCHYARD_EGRESS_ALLOW", "")),
    # REST API: requests per minute per API key (and per inbound trigger); 0 turns it off.
    "API_RATE_LIMIT_PER_MINUTE": env_int("SWITCHYARD_API_RATE_LIMIT_PER_MINUTE", 600),
    # An event posted on a key nobody waits on is kept this long for a node that will (waits.py).
    "EVENT_RETENTION_SECONDS": env_int("SWITCHYARD_EVENT_RETENTION_SECONDS", 86400),
    # Finished runs (with their history, outputs and spans) are deleted after this many
    # days; 0 keeps them for ever. Per workflow: Workflow.retention_days (workflows/operations/retention.py).
    "RETENTION_DAYS": env_float("SWITCHYARD_RETENTION_DAYS", 30.0),
    # How long a signed one-click decision link stays valid.
    "DECISION_LINK_SECONDS": env_int("SWITCHYARD_DECISION_LINK_SECONDS", 7 * 86400),
    # Webhooks: signed timestamps older (or newer) than this are refused as replays.
    "WEBHOOK_TOLERANCE_SECONDS": env_int("SWITCHYARD_WEBHOOK_TOLERANCE_SECONDS", 300),
    "WEBHOOK_TIMEOUT_SECONDS": env_float("SWITCHYARD_WEBHOOK_TIMEOUT_SECONDS", 10.0),
    "WEBHOOK_MAX_ATTEMPTS": env_int("SWITCHYARD_WEBHOOK_MAX_ATTEMPTS", 8),
    # workflow.run: how deep child runs may nest (a top-level run's children are at depth 1).
    "CHILD_DEPTH_LIMIT": env_int("SWITCHYARD_CHILD_DEPTH_LIMIT", 10),
    "WEBHOOK_BACKOFF_SECONDS": env_float("SWITCHYARD_WEBHOOK_BACKOFF_SECONDS", 10.0),
    # The keys that seal secrets at rest (Fernet, comma-separated, the first seals; see
    # workflows/store/secrets.py). `make run` generates one into .data/dev/secrets.key.
    "SECRETS_KEY": env_str("SWITCHYARD_SECRETS_KEY", ""),
    # MCP endpoint (/mcp): how long a workflow tool call waits for its run before answering
    # with the run id and link instead; a call may ask for less or more, up to the maximum.
    "MCP_WAIT_SECONDS": env_float("SWITCHYARD_MCP_WAIT_SECONDS", 30.0),
    # The longest wait a call may ask for (`_meta["io.switchyard/waitSeconds"]`, docs/integrators/mcp.md).
    "MCP_MAX_WAIT_SECONDS": env_float("SWITCHYARD_MCP_MAX_WAIT_SECONDS", 300.0),
    # MCP servers over stdio: the only commands an admin may choose (workflows/mcp), as a JSON
    # object name -> argv. Nothing typed in a browser or a definition is ever run.
    "MCP_STDIO_COMMANDS": mcp_stdio_commands(env_str("SWITCHYARD_MCP_STDIO_COMMANDS", "")),
    # An MCP server's tool list is listed again when older than this (docs/admins/mcp-servers.md).
    "MCP_TOOLS_TTL_SECONDS": env_float("SWITCHYARD_MCP_TOOLS_TTL_SECONDS", 3600.0),
    # An MCP tool call's result is cut to this many bytes of JSON (the model is told it was cut).
    "MCP_MAX_RESULT_BYTES": env_int("SWITCHYARD_MCP_MAX_RESULT_BYTES", 256 * 1024),
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".data" / "staticfiles"
# Daphne serves /static/ itself (from the apps and static/, no collectstatic) unless a
# front server does: `make run` and the browser tests have none.
SERVE_STATIC = env_bool("SWITCHYARD_SERVE_STATIC", True)


# The live dashboard (monitoring/): one broadcaster pushes snapshots to the websockets.
class MonitorSettings(TypedDict):
    """The keys of MONITOR and their types."""

    INTERVAL_SECONDS: float
    RECHECK_SECONDS: float
    METRICS_TOKEN: str
    OTLP_ENDPOINT: str
    OTEL_SERVICE_NAME: str
    BACKLOG_SAMPLE_SECONDS: float
    BACKLOG_KEEP_DAYS: int


MONITOR: MonitorSettings = {
    # Seconds between two broadcaster ticks: at most one message per topic per tick.
    "INTERVAL_SECONDS": env_float("SWITCHYARD_MONITOR_INTERVAL_SECONDS", 0.25),
    # Websockets check the user's role before each send against a decision at most this old
    # (shared by a user's connections in one process); 0 asks the database every time.
    "RECHECK_SECONDS": env_float("SWITCHYARD_MONITOR_RECHECK_SECONDS", 1.0),
    # Bearer token that may read /metrics (besides admins logged in); empty: admins only.
    "METRICS_TOKEN": env_str("SWITCHYARD_METRICS_TOKEN", ""),
    # OpenTelemetry: spans of every node attempt are exported here (OTLP over HTTP) when set.
    "OTLP_ENDPOINT": env_str("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
    "OTEL_SERVICE_NAME": env_str("OTEL_SERVICE_NAME", "switchyard"),
    # The backlog chart's history: queue depths sampled this often, kept this many days.
    "BACKLOG_SAMPLE_SECONDS": env_float("SWITCHYARD_BACKLOG_SAMPLE_SECONDS", 30.0),
    "BACKLOG_KEEP_DAYS": env_int("SWITCHYARD_BACKLOG_KEEP_DAYS", 8),
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"

# Production: cookies only over TLS; no script reads the CSRF cookie (pages carry the token
# in the markup, hx-headers), so it is HttpOnly too.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = CSRF_COOKIE_HTTPONLY = PRODUCTION
# Production: the header by which the TLS proxy (nginx, a load balancer) says a request came
# over https; the proxy must overwrite it from clients, or any client could claim https.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + env_str("SWITCHYARD_PROXY_SSL_HEADER", "X-Forwarded-Proto").upper().replace("-", "_"), "https")
    if PRODUCTION
    else None
)
# Production: plain-HTTP requests are redirected to https, except /healthz and /metrics (a load
# balancer's health check, a Prometheus scraping inside the network).
SECURE_SSL_REDIRECT = PRODUCTION and env_bool("SWITCHYARD_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
# Production: HSTS max-age; lower it while trying TLS out (browsers remember it that long).
SECURE_HSTS_SECONDS = env_int("SWITCHYARD_HSTS_SECONDS", 31536000) if PRODUCTION else 0
# Production: HSTS also covers subdomains (as `check --deploy` asks).
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION and env_bool("SWITCHYARD_HSTS_INCLUDE_SUBDOMAINS", True)
# Production: HSTS asks for preloading (as `check --deploy` asks; sending it submits nothing).
SECURE_HSTS_PRELOAD = PRODUCTION and env_bool("SWITCHYARD_HSTS_PRELOAD", True)

# SWITCHYARD_LOG_FORMAT=json: one JSON object a line, with run and node ids when a record has them.
LOG_FORMAT = env_str("SWITCHYARD_LOG_FORMAT", "plain")
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"SWITCHYARD_LOG_FORMAT must be plain or json, got {LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "workflows.runtime.logcontext.JsonFormatter"},
    },
    "filters": {"redact_secrets": {"()": "workflows.store.redaction.RedactingFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["redact_secrets"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # RQ's worker log level comes from `rqworker -v` (0: warnings only, as make run starts it).
}
