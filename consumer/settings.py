"""The one Settings object: built once in main() from LOGAGENT_* env vars (nested with `__`), passed down.

Every value is checked when the service starts (types, ranges, combinations, files it must read), so a
mistake ends in one line naming the variable and the fix (`consumer.cli.config`), never in a traceback
or a silently used default.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import orjson
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, PrivateAttr, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from analysis.agent.config import AgentConfig
from analysis.code.repo import RepoConfig, RepoSpec
from analysis.code.tools import ToolLimits
from analysis.intake.decode import DEFAULT_SERVER_ID_FIELDS
from analysis.intake.field import MAX_ID_CHARS
from analysis.intake.redact import RedactionConfig
from consumer.notify_settings import NotifySettings
from store import MemoryConfig

__all__ = ["ConfigError", "KafkaSettings", "RepartitionSettings", "Settings", "env_name", "masked_url", "secret_name",
           "writable_dir"]

_URL_HEAD = re.compile(r"(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]{0,30}://")
# Names a secret is kept under: query parameters (`api_key`, `X-Amz-Signature`, `sig`) and keys of mapping
# settings (`aws_secret_access_key`, `accessKey`, `Authorization`, `pwd`, `sas_token`, `aws_access_key_id`,
# `aws_sse_customer_key_base64`).
_SECRET_NAME = re.compile(
    r"secret|token|passw|passphrase|(?:^|[_.-])pass(?:$|[_.-])|pwd|^pw$|credential|auth|signature"
    r"|(?:^|[_.-])sas(?:$|[_.-])|jwt|hmac|private_?key|keys?$|key_?id$|key_base64$|^sig$",
    re.IGNORECASE,
)
# A query parameter, also in the fragment (`#access_token=…`, as OAuth's implicit flow returns it).
_QUERY_PAIR = re.compile(r"(?P<head>[?&;#](?P<name>[^=?&;#\s]{1,256})=)(?P<value>[^&#\s]+)")


class ConfigError(Exception):
    """A setting that cannot work as given; the text names it and says how to fix it (CLI: exit code 2)."""


def env_name(*path: str) -> str:
    """The environment variable of a setting: `env_name("kafka", "group_id")` -> LOGAGENT_KAFKA__GROUP_ID."""
    return "LOGAGENT_" + "__".join(part.upper() for part in path)


def secret_name(name: str) -> bool:
    """Whether a value kept under `name` is a secret; `*_env` and `*_file` name where one is kept instead."""
    return bool(_SECRET_NAME.search(name)) and not name.lower().endswith(("_env", "_file"))


def masked_url(text: str) -> str:
    """`text` with the userinfo of any URL in it replaced (scheme://***@host), and the value of each query
    parameter with a secret's name (`?api_key=***`), for logs and output. The userinfo is all before the
    last `@` up to the next URL, user name included (a token may stand there), whatever it holds (`@`, `/`,
    spaces): a URL with `@` in its path loses its host too, but nothing leaks."""
    text = _QUERY_PAIR.sub(lambda pair: pair["head"] + "***" if secret_name(unquote(pair["name"])) else pair[0], text)
    heads = list(_URL_HEAD.finditer(text))
    stops = [head.start() for head in heads[1:]] + [len(text)]
    parts: list[str] = []
    position = 0
    for head, stop in zip(heads, stops, strict=False):  # no URL, no stop used
        if (at := text.rfind("@", head.end(), stop)) >= 0:
            parts += [text[position : head.end()], "***"]
            position = at
    return "".join(parts) + text[position:]


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


LogLevel = Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_upper)]
SecurityProtocol = Annotated[Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], BeforeValidator(_upper)]
SaslMechanism = Annotated[Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], BeforeValidator(_upper)]


def readable_file(path: Path, setting: str) -> None:
    """Raise ValueError naming `setting` unless `path` is a file this process can read."""
    if not path.is_file():
        raise ValueError(f"{setting}={path}: no such file; mount it or correct the path")
    try:
        path.open("rb").close()
    except OSError as error:
        raise ValueError(f"{setting}={path}: cannot be read by uid {os.getuid()} ({error.strerror}); "
                         "fix its mode or owner (fsGroup on Kubernetes)") from None


_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_WEEK_S = 7 * 86_400.0


def _topic_problem(name: str) -> str | None:
    """Why Kafka would refuse `name` as a topic, or None."""
    if not _TOPIC.fullmatch(name) or name in (".", ".."):
        return "a topic name is 1-249 of A-Z a-z 0-9 . _ - (and not . or ..)"
    return None


def writable_dir(path: Path, setting: str) -> None:
    """Raise ConfigError naming `setting` unless `path` is (or can be made) a directory this process writes."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as error:
        raise ConfigError(f"{setting}: {path} is not a directory this process can write (uid {os.getuid()}: "
                          f"{error.strerror or type(error).__name__}); point it at one, or fix its mode or owner "
                          "(fsGroup on Kubernetes)") from None


_NOT_IN_A_TENANT = frozenset({"Cc", "Cf", "Co", "Cs", "Zs", "Zl", "Zp"})  # the chart's schema: \p{C}, \p{Z}


def _tenant(value: str) -> str:
    """A pinned tenant is compared exactly with the events' own: a space around it, or a control, format or
    space character other than a plain space in it, would refuse every event that names it. Unassigned
    code points pass, so a newer Unicode in the chart's validator can only refuse more."""
    if value != value.strip(" ") or any(ch != " " and unicodedata.category(ch) in _NOT_IN_A_TENANT for ch in value):
        raise ValueError(f"{value!r} has spaces around it, or a control, format or space character other than a "
                         "plain space in it; write the tenant as the events name it")
    return value


def _servers(value: str) -> str:
    """`host[:port][,host[:port]...]`, as Kafka clients take them (port 9092 when left out; an IPv6 host in
    brackets): a scheme, a bare IPv6 address or a port that is no number failed deep in the client."""
    for server in value.split(","):
        server = server.strip()
        host, colon, port = server.rpartition(":") if not server.endswith("]") else (server, "", "")
        if not colon:
            host, port = server, "9092"
        bare_ipv6 = ":" in host and not (host.startswith("[") and host.endswith("]"))
        digits = port.isascii() and port.isdigit()
        if not host.strip("[]") or "/" in host or bare_ipv6 or not digits or not 0 < int(port) < 65536:
            raise ValueError(f"{server!r} is not host[:port] (a port from 1 to 65535, an IPv6 host in brackets, "
                             "no scheme); list brokers as host:port,host:port")
    return value


class KafkaSettings(BaseModel):
    """Where to read errors and write events."""

    bootstrap_servers: Annotated[str, AfterValidator(_servers)] = "127.0.0.1:9092"
    input_topic: str = "errors"
    output_topic: str = "analyses"
    dlq_topic: str = "errors.dlq"
    review_topic: str = "analyses.review"
    feedback_topic: str = "analyses.feedback"
    group_id: str = Field("logagent", min_length=1)
    client_id: str = Field("logagent", min_length=1)
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    session_timeout_ms: int = Field(10_000, ge=100)
    heartbeat_interval_ms: int = Field(3_000, ge=10)
    rebalance_timeout_ms: int = Field(30_000, ge=100)
    max_poll_records: int = Field(500, ge=1)
    fetch_max_wait_ms: int = Field(
        500, ge=10, description="Longest the broker holds a fetch with nothing new. Quiet bursts close up to "
        "about twice this after the input's end was seen (`consumer/watermark.py`).",
    )
    commit_interval_s: float = Field(1.0, gt=0, description="How often safe offsets are committed.")
    isolation_level: Literal["read_committed", "read_uncommitted"] = Field(
        "read_committed", description="read_committed skips aborted transactions."
    )
    linger_ms: int = Field(5, ge=0, description="How long the producer waits to batch events.")
    enable_idempotence: bool = Field(
        False, description="Idempotent producer; Kafka supports it, the embedded tansu does not."
    )
    dlq_error_max_chars: int = Field(512, ge=1, description="Cap on the `error` header of a DLQ message.")
    dlq_max_value_bytes: int = Field(
        512 * 1024, ge=1024, le=896 * 1024,
        description="A larger bad message is cut to this in the DLQ (headers say so, with its sha256); at most "
        "896 KiB, so a copy with its key (cut past 64 KiB) and headers fits Kafka's default 1 MiB record.",
    )
    max_event_bytes: int = Field(
        1_048_576, ge=1024,
        description="Largest analysis event record (Kafka's default record limit); a larger one is cut to "
        "fit, else dead-lettered. Set it to the output topic's max.message.bytes when that is lower.",
    )
    # --- TLS and SASL files (mounted secrets), checked at start-up ---------------------------------
    ssl_cafile: Path | None = Field(None, description="CA bundle (PEM) that signs the brokers' certificates.")
    ssl_certfile: Path | None = Field(None, description="Client certificate (PEM) for mutual TLS.")
    ssl_keyfile: Path | None = Field(None, description="Private key (PEM) of the client certificate.")
    ssl_key_password: SecretStr | None = Field(None, description="Password of an encrypted client key.")
    sasl_password_file: Path | None = Field(
        None, description="File holding the SASL password (a mounted Secret), instead of sasl_password."
    )

    @model_validator(mode="after")
    def _check(self) -> KafkaSettings:
        """Combinations Kafka would only reject at connect time, named with their variables and fixes."""
        protocol = self.security_protocol
        mechanism = env_name("kafka", "sasl_mechanism")
        if protocol.startswith("SASL_") and self.sasl_mechanism is None:
            raise ValueError(f"{env_name('kafka', 'security_protocol')}={protocol} needs {mechanism}: "
                             "set it to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        if self.sasl_mechanism is not None and not protocol.startswith("SASL_"):
            raise ValueError(f"{mechanism} is set but {env_name('kafka', 'security_protocol')}={protocol}: "
                             "use SASL_SSL (or SASL_PLAINTEXT), or unset the mechanism")
        if self.sasl_mechanism is not None and not self.sasl_username:
            raise ValueError(f"{mechanism}={self.sasl_mechanism} needs {env_name('kafka', 'sasl_username')}")
        if self.sasl_mechanism is not None and self.sasl_password is None and self.sasl_password_file is None:
            raise ValueError(f"{mechanism}={self.sasl_mechanism} needs {env_name('kafka', 'sasl_password')} "
                             f"or {env_name('kafka', 'sasl_password_file')}")
        tls_files = ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
        if not protocol.endswith("SSL") and any(getattr(self, name) for name in tls_files):
            raise ValueError(f"TLS files are set but {env_name('kafka', 'security_protocol')}={protocol}: "
                             "use SSL or SASL_SSL, or unset them")
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError(f"{env_name('kafka', 'ssl_keyfile')} needs {env_name('kafka', 'ssl_certfile')}")
        for name in (*tls_files, "sasl_password_file"):
            path = getattr(self, name)
            if path is not None:
                readable_file(path, env_name("kafka", name))
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(f"{env_name('kafka', 'heartbeat_interval_ms')} must be below "
                             f"{env_name('kafka', 'session_timeout_ms')} ({self.session_timeout_ms}), "
                             "a third of it is usual")
        return self

    def sasl_secret(self) -> str | None:
        """The SASL password, from the setting or read from its file at call time (a rotated Secret)."""
        if self.sasl_password is not None:
            return self.sasl_password.get_secret_value()
        if self.sasl_password_file is not None:
            return self.sasl_password_file.read_text(encoding="utf-8").strip()
        return None


class WindowSettings(BaseModel):
    """How bursts of the same failure are grouped."""

    quiet_s: float = Field(30.0, gt=0, le=_WEEK_S, description="A burst closes after this long without a new "
                           "event (a week at most).")
    max_length_s: float = Field(300.0, gt=0, le=_WEEK_S, description="A burst closes this long after its first "
                                "event (a week at most: it holds the burst's offsets and memory).")
    max_open: int = Field(10_000, ge=1, description="Open bursts cap; past it the oldest closes early.")
    max_samples: int = Field(20, ge=1, description="Events kept per burst for analysis and the event's samples.")
    max_open_bytes: int = Field(
        256 << 20, ge=1 << 20, description="Bytes the open bursts' samples may hold; past it the oldest closes early."
    )

    @model_validator(mode="after")
    def _check(self) -> WindowSettings:
        if self.quiet_s > self.max_length_s:
            raise ValueError(f"{env_name('window', 'quiet_s')}={self.quiet_s:g} exceeds "
                             f"{env_name('window', 'max_length_s')}={self.max_length_s:g}: lower the first "
                             "or raise the second")
        return self


class InputSettings(BaseModel):
    """Decoding limits and in-app rules for untrusted input."""

    max_message_bytes: int = Field(1_048_576, ge=1024)
    max_depth: int = Field(64, ge=2)
    commit_field: str | None = Field(None, description="Extra dotted field naming the deployed commit.")
    in_app_prefixes: list[str] = Field(default_factory=list, description="Module/package prefixes in-app.",
                                       examples=[["com.acme"]])
    server_id_fields: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SERVER_ID_FIELDS),
        description="Fields naming the server when `server_id` is absent, first match wins (JSON list).",
    )
    keyed_by_server: bool = Field(
        False, description="Producers key every message by server id: skip the repartition topic (one hop "
        "less; a server's bursts then stay on its input partition).",
    )
    tenant: Annotated[str, AfterValidator(_tenant)] = Field(
        "", max_length=MAX_ID_CHARS,
        description="The one tenant this deployment serves, for a deployment per tenant topic: an event naming "
        "no tenant is this one's, one naming another goes to the DLQ (`tenant_mismatch`), and a verdict naming "
        "another is skipped. Compared exactly (case included); no spaces around it. Empty: each event's own "
        "tenant field.",
    )


# --- the topology: the repartition topic between the key stage and the burst window ----------------

class RepartitionSettings(BaseModel):
    """The internal topic that brings every event of a burst to one replica (unused when the input is
    keyed by server). Created at start-up when missing, like Kafka Streams' repartition topics."""

    topic: str = Field("", description="Its name; empty: <kafka.group_id>-bursts-repartition.")
    partitions: int = Field(0, ge=0, description="Partitions when created; 0: as many as the input topic.")
    replication_factor: int = Field(
        0, ge=0, description="Replicas when created; 0: min(3, the brokers in the cluster's metadata).",
    )
    create: bool = Field(True, description="Create the topic at start-up when missing (needs the Create ACL).")
    retention_ms: int = Field(
        86_400_000, ge=60_000, description="How long forwarded records stay; past the longest outage to ride out.",
    )
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field(
        "lz4", description="Compression of forwarded batches (JSON logs shrink several times).",
    )
    linger_ms: int = Field(10, ge=0, description="How long watermark records wait to fill a batch (forwards go "
                           "in one batch per partition at the end of each turn of the loop).")
    watermark_interval_ms: int = Field(
        1000, ge=10, description="How often each replica tells the windows how far it has read the input "
        "(the watermarks bursts close on): a burst closes up to this long after its quiet time.",
    )

    def topic_for(self, group_id: str) -> str:
        """The topic's name: the setting, or one derived from the consumer group."""
        return self.topic or f"{group_id}-bursts-repartition"


class PipelineSettings(BaseModel):
    """Concurrency and backpressure of analysis."""

    max_inflight: int = Field(4, ge=1, description="Bursts analysed at once.")
    queue_size: int = Field(64, ge=1, description="Closed bursts waiting; when full, fetching pauses.")
    resume_at: int = Field(16, ge=0, description="Fetching resumes when the queue is back at this size.")
    poll_timeout_ms: int = Field(
        200, ge=1, description="Longest wait for new messages before windows are checked."
    )
    max_turn_s: float = Field(
        1.0, gt=0, description="Longest the main loop reads one fetch before it turns; the rest is fetched again."
    )
    shutdown_grace_s: float = Field(20.0, ge=0, description="On SIGTERM, how long in-flight analyses may finish.")
    retry_initial_s: float = Field(0.5, gt=0, description="First backoff after a retriable failure.")
    retry_max_s: float = Field(30.0, gt=0, description="Cap of the exponential backoff (full jitter).")
    retry_attempts: int = Field(
        5, ge=1, description="Analysis attempts on retriable errors before a `failed` event is published."
    )
    event_source: str | None = Field(None, description="CloudEvents `source`; default logagent/<group id>.")

    @model_validator(mode="after")
    def _check(self) -> PipelineSettings:
        if self.resume_at > self.queue_size:
            raise ValueError(f"{env_name('pipeline', 'resume_at')}={self.resume_at} exceeds "
                             f"{env_name('pipeline', 'queue_size')}={self.queue_size}: fetching would never "
                             "resume; lower the first")
        return self


class HttpSettings(BaseModel):
    """The /metrics, /livez and /readyz endpoint."""

    host: str = "0.0.0.0"  # noqa: S104 - the pod's probes and Prometheus reach it from outside
    port: int = Field(9464, ge=0, le=65535)
    stall_after_s: float = Field(
        120.0, gt=0, description="/livez fails once the main loop has made no progress for this long."
    )


class OllamaSettings(BaseModel):
    """The LLM; without `url` the service runs in heuristic mode (no LLM calls)."""

    url: str | None = Field(None, description="Ollama base URL, e.g. http://ollama:11434.")
    attempts: int = Field(2, ge=1, description="Tries per analysis before falling back to heuristic.")
    failure_threshold: int = Field(3, ge=1, description="Consecutive failures that open the circuit.")
    reset_after_s: float = Field(30.0, gt=0, description="How long the circuit stays open before a probe.")
    analyses_per_hour: int = Field(
        60, ge=0, description="Most model analyses a server gets an hour on each replica (all at once if need be); "
        "past it its bursts get the heuristic analysis with a note, so a flood of new failures from one server "
        "cannot take the model from the others (0: no limit). Recurrences answered from memory and bursts while "
        "the circuit is open do not count."
    )


class ReadinessSettings(BaseModel):
    """When /readyz says the replica cannot serve its share: store closed, or the broker gone too long."""

    broker_grace_s: float = Field(
        60.0, gt=0, description="Broker unreachable this long makes the replica unready (brief blips do not)."
    )
    broker_probe_s: float = Field(10.0, gt=0, description="How often the broker is asked for metadata.")


class Settings(BaseSettings):
    """All settings of Log Agent."""

    model_config = SettingsConfigDict(env_prefix="LOGAGENT_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Field(Path("./.data"), description="Memory and repo cache live here unless set apart.")
    log_level: LogLevel = "INFO"
    scope: str = Field("default", min_length=1, description="Memory scope of this deployment (TTLs are per scope).")
    memory_maintenance_s: float = Field(3600.0, gt=0, description="How often expired memory is compacted away.")
    ollama_url: str | None = Field(None, description="Shorthand for ollama.url (LOGAGENT_OLLAMA_URL).")
    repos_file: Path | None = Field(
        None, description="JSON file mapping server id to {url, branch, token_env, token_file}."
    )
    kafka: KafkaSettings = KafkaSettings()
    window: WindowSettings = WindowSettings()
    input: InputSettings = InputSettings()
    repartition: RepartitionSettings = RepartitionSettings()
    pipeline: PipelineSettings = PipelineSettings()
    http: HttpSettings = HttpSettings()
    ollama: OllamaSettings = OllamaSettings()
    readiness: ReadinessSettings = ReadinessSettings()
    agent: AgentConfig = AgentConfig()
    tools: ToolLimits = ToolLimits()
    redaction: RedactionConfig = RedactionConfig()
    repo: RepoConfig = RepoConfig(cache_dir=Path())
    memory: MemoryConfig = MemoryConfig(uri="")
    notify: NotifySettings = NotifySettings()
    _file_servers: dict[str, RepoSpec] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        """Topics Kafka would refuse or that would feed the service its own output, and values no clock or
        size can reach (`inf`, `nan`), named with their variables: the service would start, then fail."""
        kafka = self.kafka
        topics = {env_name("kafka", name): getattr(kafka, name) for name in
                  ("input_topic", "output_topic", "dlq_topic", "review_topic", "feedback_topic")}
        if not self.input.keyed_by_server:
            derived = "" if self.repartition.topic else f" (from {env_name('kafka', 'group_id')})"
            topics[env_name("repartition", "topic") + derived] = self.repartition.topic_for(kafka.group_id)
        notify_dlq = env_name("notify", "dlq_topic"), self.notify.dlq_topic
        for variable, topic in [*topics.items(), notify_dlq]:
            if (problem := _topic_problem(topic)) is not None:
                raise ValueError(f"{variable}={topic!r}: {problem}")
        # notify's DLQ may be the service's: neither is read
        roles = [*topics.items(), *([notify_dlq] if notify_dlq[1] != kafka.dlq_topic else [])]
        seen: dict[str, str] = {}
        for variable, topic in roles:
            if topic in seen:
                raise ValueError(f"{variable} and {seen[topic]} are both {topic!r}: each topic has one role "
                                 "(a DLQ or an output read as input would feed the service its own records)")
            seen[topic] = variable
        if (infinite := _not_finite(self, ())) is not None:
            raise ValueError(f"{infinite} is not a finite number: give a number of seconds or bytes")
        return self

    @model_validator(mode="after")
    def _derive(self) -> Settings:
        """Fill what follows from other settings: the shorthand URL and paths under `data_dir`; read the
        repository map file once, so a missing or malformed one stops the start."""
        if self.repos_file is not None:
            self._file_servers = _read_repos_file(self.repos_file)
        if self.ollama_url and self.ollama.url and self.ollama_url != self.ollama.url:
            raise ValueError(f"{env_name('ollama_url')} and {env_name('ollama', 'url')} name two URLs: set one "
                             "(the first is a shorthand for the second)")
        if self.ollama_url and not self.ollama.url:
            self.ollama = self.ollama.model_copy(update={"url": self.ollama_url})
        if "cache_dir" not in self.repo.model_fields_set or self.repo.cache_dir == Path():
            self.repo = self.repo.model_copy(update={"cache_dir": self.data_dir / "repos"})
        if "uri" not in self.memory.model_fields_set or not self.memory.uri:
            self.memory = self.memory.model_copy(update={"uri": str(self.data_dir / "memory")})
        return self

    def repo_servers(self) -> dict[str, RepoSpec]:
        """The server → repository map: `repo.servers` plus the entries of `repos_file` (file wins)."""
        return {**self.repo.servers, **self._file_servers}


def _not_finite(model: BaseModel, path: tuple[str, ...]) -> str | None:
    """The variable of the first setting under `model` that holds `inf` or `nan`, or None."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, float) and not math.isfinite(value):
            return env_name(*path, name)
        if isinstance(value, BaseModel) and (found := _not_finite(value, (*path, name))) is not None:
            return found
    return None


def _read_repos_file(path: Path) -> dict[str, RepoSpec]:
    setting = env_name("repos_file")
    readable_file(path, setting)
    try:
        raw: Any = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as error:
        raise ValueError(f"{setting}={path} is not JSON ({error}); write an object of "
                         '{"server-id": {"url": "...", "branch": "main"}}') from None
    if not isinstance(raw, dict):
        raise ValueError(f"{setting}={path} must hold a JSON object mapping server id to {{url, branch}}")
    servers: dict[str, RepoSpec] = {}
    for name, spec in raw.items():
        try:
            servers[name] = RepoSpec.model_validate(spec)
        except ValueError as error:
            first = str(error).splitlines()[1:3]
            raise ValueError(f"{setting}={path}: entry {name!r} is not {{url, branch, token_env, token_file}} "
                             f"({' '.join(line.strip() for line in first)})") from None
    return servers
