"""Settings from the environment: every mistake is one line naming the variable and the fix, exit code 2;
`logagent config` shows what is in force and where it came from, secrets masked."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from consumer.cli import main
from consumer.cli.config import effective_settings, load_settings
from consumer.settings import ConfigError, Settings

pytestmark = pytest.mark.usefixtures("settings_env")


def _refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **env: str) -> str:
    """Set `env`, run `logagent config`; assert exit 2 with exactly one stderr line, no traceback; return it."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = main(["config", "--json"])
    captured = capsys.readouterr()
    assert code == 2, captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("logagent: "), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


MISTAKES = {
    "list not JSON": ({"LOGAGENT_INPUT__IN_APP_PREFIXES": "com.acme"},
                      ["LOGAGENT_INPUT__IN_APP_PREFIXES", "JSON list", '["com.acme"]']),
    "unknown protocol": ({"LOGAGENT_KAFKA__SECURITY_PROTOCOL": "FOO"},
                         ["LOGAGENT_KAFKA__SECURITY_PROTOCOL=FOO", "'SASL_SSL'"]),
    "SASL without mechanism": ({"LOGAGENT_KAFKA__SECURITY_PROTOCOL": "SASL_SSL"},
                               ["LOGAGENT_KAFKA__SASL_MECHANISM", "SCRAM-SHA-512"]),
    "SASL without password": ({"LOGAGENT_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
                               "LOGAGENT_KAFKA__SASL_MECHANISM": "PLAIN", "LOGAGENT_KAFKA__SASL_USERNAME": "u"},
                              ["LOGAGENT_KAFKA__SASL_PASSWORD", "LOGAGENT_KAFKA__SASL_PASSWORD_FILE"]),
    "unknown log level": ({"LOGAGENT_LOG_LEVEL": "LOUD"}, ["LOGAGENT_LOG_LEVEL=LOUD", "'DEBUG'"]),
    "negative window": ({"LOGAGENT_WINDOW__QUIET_S": "-5"}, ["LOGAGENT_WINDOW__QUIET_S=-5", "greater than 0"]),
    "quiet longer than max": ({"LOGAGENT_WINDOW__QUIET_S": "400"},
                              ["LOGAGENT_WINDOW__QUIET_S=400", "LOGAGENT_WINDOW__MAX_LENGTH_S=300"]),
    "port out of range": ({"LOGAGENT_HTTP__PORT": "70000"}, ["LOGAGENT_HTTP__PORT=70000", "65535"]),
    "resume above queue": ({"LOGAGENT_PIPELINE__RESUME_AT": "100"},
                           ["LOGAGENT_PIPELINE__RESUME_AT=100", "LOGAGENT_PIPELINE__QUEUE_SIZE=64"]),
    "misspelt variable": ({"LOGAGENT_KAFKA_BOOTSTRAP_SERVERS": "kafka:9092"},
                          ["LOGAGENT_KAFKA_BOOTSTRAP_SERVERS is not a setting",
                           "did you mean LOGAGENT_KAFKA__BOOTSTRAP_SERVERS?"]),
    "misspelt group": ({"LOGAGENT_WINDWO__QUIET_S": "5"}, ["did you mean LOGAGENT_WINDOW__QUIET_S?"]),
    "repos file missing": ({"LOGAGENT_REPOS_FILE": "/nonexistent/repos.json"},
                           ["LOGAGENT_REPOS_FILE=/nonexistent/repos.json", "no such file"]),
    "TLS CA missing": ({"LOGAGENT_KAFKA__SECURITY_PROTOCOL": "SSL",
                        "LOGAGENT_KAFKA__SSL_CAFILE": "/nonexistent/ca.pem"},
                       ["LOGAGENT_KAFKA__SSL_CAFILE=/nonexistent/ca.pem", "no such file"]),
    "TLS files without TLS": ({"LOGAGENT_KAFKA__SSL_CAFILE": "/nonexistent/ca.pem"},
                              ["LOGAGENT_KAFKA__SECURITY_PROTOCOL=PLAINTEXT", "SSL"]),
    "SASL password file missing": ({"LOGAGENT_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
                                    "LOGAGENT_KAFKA__SASL_MECHANISM": "SCRAM-SHA-256",
                                    "LOGAGENT_KAFKA__SASL_USERNAME": "u",
                                    "LOGAGENT_KAFKA__SASL_PASSWORD_FILE": "/nonexistent/pw"},
                                   ["LOGAGENT_KAFKA__SASL_PASSWORD_FILE=/nonexistent/pw", "no such file"]),
    "unknown redaction kind": ({"LOGAGENT_REDACTION__KINDS": '["nope"]'},
                               ["LOGAGENT_REDACTION__KINDS", "unknown redaction kinds: ['nope']"]),
    "redaction pattern not a regex": ({"LOGAGENT_REDACTION__EXTRA_PATTERNS": '{"x": "("}'},
                                      ["LOGAGENT_REDACTION__EXTRA_PATTERNS", "'x' is not a regular expression"]),
    "redaction id key too short": ({"LOGAGENT_REDACTION__ID_KEY": "shortkey"},
                                   ["LOGAGENT_REDACTION__ID_KEY is invalid", "at least 16 characters"]),
    "Ollama shorthand not a URL": ({"LOGAGENT_OLLAMA_URL": "notaurl"},
                                   ["LOGAGENT_OLLAMA_URL is invalid", "not an http(s) URL", "http://host"]),
    "Ollama URL without a host": ({"LOGAGENT_OLLAMA__URL": "http://:11434"},
                                  ["LOGAGENT_OLLAMA__URL is invalid", "without a host"]),
    "embedder URL of another scheme": ({"LOGAGENT_MEMORY__OLLAMA_URL": "ftp://ollama"},
                                       ["LOGAGENT_MEMORY__OLLAMA_URL is invalid", "not an http(s) URL"]),
    "API URL with a bad port": ({"LOGAGENT_NOTIFY__GITLAB__API_URL": "https://gitlab:99999/api/v4"},
                                ["LOGAGENT_NOTIFY__GITLAB__API_URL is invalid", "its port"]),
}


class TestStartupMistakes:
    @pytest.mark.parametrize("command", [["run"], ["analyze", "--repo", ".", "--offline"], ["redact", "-"]])
    @pytest.mark.parametrize("env", [{"LOGAGENT_REDACTION__KINDS": '["nope"]'},
                                     {"LOGAGENT_REDACTION__EXTRA_PATTERNS": '{"x": "("}'}])
    def test_bad_redaction_settings_stop_every_command_with_one_line(
        self, command: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """`run`, `analyze` and `redact` refuse a bad redaction setting before they start: exit 2, one line."""
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code = main(command)
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"logagent: {next(iter(env))} is invalid")
        assert "Traceback" not in captured.err

    @pytest.mark.parametrize("case", list(MISTAKES))
    def test_each_mistake_is_one_line_naming_the_setting_and_the_fix(
        self, case: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The line names the variable (and the value given) and what would be accepted."""
        env, expected = MISTAKES[case]
        line = _refused(monkeypatch, capsys, **env)
        for part in expected:
            assert part in line, line

    def test_a_secret_is_never_echoed(self, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A bad value of a secret setting is reported without the value."""
        line = _refused(monkeypatch, capsys, LOGAGENT_KAFKA__SECURITY_PROTOCOL="SASL_SSL",
                        LOGAGENT_KAFKA__SASL_MECHANISM="NOPE", LOGAGENT_KAFKA__SASL_PASSWORD="hunter2-secret")
        assert "LOGAGENT_KAFKA__SASL_MECHANISM=NOPE" in line
        assert "hunter2-secret" not in line

    def test_a_secret_url_is_checked_but_never_echoed(self, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A webhook URL is a secret (it may carry a token): the line names the variable, not the value."""
        line = _refused(monkeypatch, capsys, LOGAGENT_NOTIFY__WEBHOOK__URL="https://hooks.example:s3cr3t-token/x")
        assert line.startswith("logagent: LOGAGENT_NOTIFY__WEBHOOK__URL is invalid: not a URL")
        assert "s3cr3t" not in line

    @pytest.mark.parametrize(("env", "said"), [
        ({"LOGAGENT_NOTIFY": '{"slack": {"webhook_url": "nope"}}'}, "LOGAGENT_NOTIFY is invalid at .slack.webhook_url"),
        ({"LOGAGENT_NOTIFY__SLACK": '{"webhook_url": "nope"}'}, "LOGAGENT_NOTIFY__SLACK is invalid at .webhook_url"),
        ({"LOGAGENT_NOTIFY__SLACK__WEBHOOK_URL": "nope"}, "LOGAGENT_NOTIFY__SLACK__WEBHOOK_URL is invalid"),
    ])
    def test_a_bad_url_names_the_variable_that_set_it(self, env: dict[str, str], said: str,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A URL set in a group's JSON is named by that group and its path (it named the leaf variable, which
        the user never set)."""
        line = _refused(monkeypatch, capsys, **env)
        assert line == f"logagent: {said}: not an http(s) URL; write http://host:port or https://host/path"

    @pytest.mark.parametrize("url", ["http://admin:abc/def+gh=@ollama:11434", "http://admin:pass word@ollama:11434",
                                     "http://ghp_Tok3nSecretValue@ollama:99999"])
    def test_an_invalid_url_is_never_echoed(self, url: str, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """A URL that cannot be read cannot be masked for sure: the line names the variable and the reason."""
        line = _refused(monkeypatch, capsys, LOGAGENT_OLLAMA_URL=url)
        assert line.startswith("logagent: LOGAGENT_OLLAMA_URL is invalid: "), line
        assert not [part for part in ("admin", "abc", "def", "pass", "word", "Tok3n") if part in line], line

    def test_urls_and_unset_optional_urls_are_accepted(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """http and https URLs with a host, and an empty shorthand (no Ollama: heuristic mode), pass."""
        monkeypatch.setenv("LOGAGENT_OLLAMA_URL", "")
        monkeypatch.setenv("LOGAGENT_MEMORY__OLLAMA_URL", "https://[::1]:11434/")
        monkeypatch.setenv("LOGAGENT_NOTIFY__SLACK__WEBHOOK_URL", "https://hooks.slack.example/services/T0/B0/x")
        import os

        settings = load_settings(os.environ)
        assert settings.ollama.url is None and settings.memory.ollama_url == "https://[::1]:11434/"

    @pytest.mark.parametrize(("content", "expected"), [
        (b"{not json", "is not JSON"),
        (b'["a list"]', "must hold a JSON object"),
        (b'{"svc": {"branch": "main"}}', "entry 'svc'"),
    ])
    def test_a_malformed_repos_file_is_refused(self, content: bytes, expected: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """A repository map that is not JSON, not an object or has an entry without url stops the start."""
        path = tmp_path / "repos.json"
        path.write_bytes(content)
        line = _refused(monkeypatch, capsys, LOGAGENT_REPOS_FILE=str(path))
        assert f"LOGAGENT_REPOS_FILE={path}" in line and expected in line

    def test_real_top_level_settings_and_their_mapping_keys_are_accepted(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """LOGAGENT_OLLAMA_URL and LOGAGENT_REPOS_FILE are settings (not misspellings of OLLAMA__URL), keys
        under a mapping setting are part of it, and a repository's token variable may be named LOGAGENT_*."""
        repos = tmp_path / "repos.json"
        repos.write_bytes(orjson.dumps({"svc": {"url": "https://git.example.com/svc.git",
                                                "token_env": "LOGAGENT_SVC_TOKEN"}}))
        environ = {"LOGAGENT_OLLAMA_URL": "http://ollama:11434", "LOGAGENT_REPOS_FILE": str(repos),
                   "LOGAGENT_MEMORY__TTL_S__DEFAULT": "60", "LOGAGENT_SVC_TOKEN": "t0ken"}
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        settings = load_settings(environ)
        assert settings.ollama.url == "http://ollama:11434"
        assert settings.memory.ttl_s == {"default": 60.0}
        assert set(settings.repo_servers()) == {"svc"}

    def test_an_unknown_variable_far_from_every_name_is_refused_too(self) -> None:
        """Without a close match the message points at `logagent config`."""
        with pytest.raises(ConfigError, match="LOGAGENT_ZZZ is not a setting: see `logagent config`"):
            load_settings({"LOGAGENT_ZZZ": "1"})


class TestConfigCommand:
    def test_prints_every_setting_with_its_source_and_masks_secrets(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each setting appears once with value and source: env, default, or what it was derived from;
        SecretStr values and URL passwords are masked."""
        monkeypatch.setenv("LOGAGENT_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
        monkeypatch.setenv("LOGAGENT_KAFKA__SASL_MECHANISM", "PLAIN")
        monkeypatch.setenv("LOGAGENT_KAFKA__SASL_USERNAME", "svc")
        monkeypatch.setenv("LOGAGENT_KAFKA__SASL_PASSWORD", "hunter2-secret")
        monkeypatch.setenv("LOGAGENT_OLLAMA_URL", "http://user:pa55word@ollama:11434")
        assert main(["config", "--json"]) == 0
        out = capsys.readouterr().out
        assert "hunter2-secret" not in out and "pa55word" not in out
        rows = {row["setting"]: row for row in map(json.loads, out.splitlines())}
        assert rows["LOGAGENT_KAFKA__SASL_PASSWORD"] == {
            "setting": "LOGAGENT_KAFKA__SASL_PASSWORD", "value": "********", "source": "env"}
        assert rows["LOGAGENT_OLLAMA__URL"]["value"] == "http://***@ollama:11434"
        assert rows["LOGAGENT_OLLAMA__URL"]["source"] == "derived from LOGAGENT_OLLAMA_URL"
        assert rows["LOGAGENT_MEMORY__URI"]["source"] == "derived from LOGAGENT_DATA_DIR"
        assert rows["LOGAGENT_KAFKA__GROUP_ID"] == {
            "setting": "LOGAGENT_KAFKA__GROUP_ID", "value": "logagent", "source": "default"}

    def test_a_value_under_a_key_named_like_a_secret_is_masked_whatever_its_type(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Storage options passed to LanceDB as-is: a key or token under any of their names is masked, an
        account key too (`azure_storage_account_key` was shown), and a number under a secret name too."""
        hidden = {"azure_storage_account_key": "c2VjcmV0LWtleQ==", "aws_session_token": "tok-123",
                  "Authorization": "Bearer abc", "pwd": "hunter2", "accessKey": "AK1", "sas": "sv=1&sig=2",
                  "signature": "dead", "aws_access_key_id": "AKIA1", "accessKeyId": "AKIA2", "passphrase": "open",
                  "aws_sse_customer_key_base64": "MDEy"}  # from Authorization on: attacker reviews
        monkeypatch.setenv("LOGAGENT_MEMORY__STORAGE__EXTRA", orjson.dumps({**hidden, "region": "eu-1"}).decode())
        monkeypatch.setenv("LOGAGENT_MEMORY__TTL_S", '{"default": 60, "team_token": 987654321}')
        monkeypatch.setenv("LOGAGENT_REPO__SERVERS", '{"compass-api": {"url": "https://u:s3cret@git.example/c.git"}}')
        assert main(["config", "--json"]) == 0
        rows = {row["setting"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
        # A server named like a secret is a name: its entry shows, its URL's password does not.
        servers = json.loads(rows["LOGAGENT_REPO__SERVERS"]["value"])
        assert servers["compass-api"]["url"] == "https://***@git.example/c.git"
        assert json.loads(rows["LOGAGENT_MEMORY__STORAGE__EXTRA"]["value"]) == {
            **dict.fromkeys(hidden, "********"), "region": "eu-1"}
        assert json.loads(rows["LOGAGENT_MEMORY__TTL_S"]["value"]) == {"default": 60.0, "team_token": "********"}

    def test_lists_exactly_the_settings_the_readme_documents(self) -> None:
        """One row per leaf setting, the same set tests/unit/test_readme.py checks the README against."""
        from tests.unit.test_readme import _env_vars

        rows = effective_settings(Settings(), {})
        assert [row["setting"] for row in rows] == list(_env_vars(Settings))
