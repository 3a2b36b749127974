"""A wrong value of any kind of setting (group, mapping, list, boolean, number, choice) is one line naming the
variable that was set, where in its JSON the mistake is, and what it accepts; every example it proposes
is accepted."""

from __future__ import annotations

import os
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from consumer.cli import main
from consumer.cli.config import load_settings
from consumer.cli.settings_tree import kinds
from consumer.settings import ConfigError, Settings

pytestmark = pytest.mark.usefixtures("settings_env")


def _walk(model: type[BaseModel], prefix: str = "LOGAGENT_") -> Iterator[tuple[str, Any]]:
    """(variable, annotation) of every group and setting, groups included (they take JSON too)."""
    for name, field in model.model_fields.items():
        variable = prefix + name.upper()
        yield variable, field.annotation
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _walk(field.annotation, variable + "__")


def _wrong_values(annotation: Any) -> list[str]:
    """Values no setting of this kind accepts: a list where an object goes and the other way round, an
    item or field that no scalar, record or list accepts (a list of lists), a word for a bool or number."""
    found = kinds(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ["[1]", '{"%s": [[1]]}' % next(iter(annotation.model_fields))]  # noqa: UP031 - JSON braces
    if dict in found:
        return ["[1]", '{"shop": [[1]]}']
    if found & {list, tuple}:
        return ['{"a": 1}', "[[[1]]]"]
    if bool in found:
        return ["maybe"]
    if found & {int, float}:
        return ["abc"]
    if typing.Literal in found or any(typing.get_origin(arg) is typing.Literal
                                      for arg in typing.get_args(annotation)):
        return ["nope"]
    return []


CASES = [(variable, value) for variable, annotation in _walk(Settings) for value in _wrong_values(annotation)]
JSON_SETTINGS = [variable for variable, annotation in _walk(Settings)
                 if _wrong_values(annotation)[:1] in (["[1]"], ['{"a": 1}'])]


def _error(environ: dict[str, str]) -> str:
    """The ConfigError of loading the settings with `environ` added to the environment."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        with pytest.raises(ConfigError) as refused:
            load_settings(os.environ)
    return str(refused.value)


def _accepted(environ: dict[str, str]) -> Settings:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        return load_settings(os.environ)


class TestEveryKindOfSetting:
    def test_the_walk_covers_every_kind(self) -> None:
        """Groups, mappings, lists, booleans, numbers and choices are all among the cases."""
        assert {"LOGAGENT_WINDOW", "LOGAGENT_MEMORY__TTL_S", "LOGAGENT_INPUT__IN_APP_PREFIXES",
                "LOGAGENT_KAFKA__ENABLE_IDEMPOTENCE", "LOGAGENT_HTTP__PORT", "LOGAGENT_LOG_LEVEL",
                "LOGAGENT_REPARTITION__COMPRESSION"} <= {variable for variable, _ in CASES}
        assert len(CASES) > 150

    @pytest.mark.parametrize(("variable", "value"), CASES, ids=[f"{variable}={value}" for variable, value in CASES])
    def test_a_wrong_value_is_one_line_naming_the_variable(self, variable: str, value: str) -> None:
        """The line starts with the variable that was set, never with another or a path of its JSON."""
        message = _error({variable: value})
        assert len(message.splitlines()) == 1, message
        assert message.startswith((f"{variable} is invalid", f"{variable}={value} is invalid",
                                   f"{variable}={value.upper()} is invalid")), message

    @pytest.mark.parametrize("variable", JSON_SETTINGS)
    def test_a_json_setting_proposes_an_example_it_accepts(self, variable: str) -> None:
        """The example in the line (`e.g. NAME='...'`) is itself a valid value of the setting."""
        for wrong in ("not json", _wrong_values_of(variable)[0]):
            message = _error({variable: wrong})
            assert f"e.g. {variable}='" in message, message
            example = message.split(f"e.g. {variable}='", 1)[1].rsplit("'", 1)[0]
            _accepted({variable: example})


def _wrong_values_of(variable: str) -> list[str]:
    return [value for name, value in CASES if name == variable]


class TestMappingSettings:
    def test_a_wrong_value_in_a_mapping_names_the_setting_the_key_and_what_it_takes(self) -> None:
        """`LOGAGENT_MEMORY__TTL_S={"default": "abc"}` names the variable, the key, the value, what a value
        must be and an example (it used to say `LOGAGENT_MEMORY__TTL_S=abc`, as if abc were the whole value)."""
        assert _error({"LOGAGENT_MEMORY__TTL_S": '{"default": "abc"}'}) == (
            'LOGAGENT_MEMORY__TTL_S is invalid at .default ("abc"): input should be a valid number, unable to '
            "parse string as a number; e.g. LOGAGENT_MEMORY__TTL_S='{\"default\":2592000.0}'")

    def test_a_value_that_is_not_json_gets_an_example_of_this_setting(self) -> None:
        """`LOGAGENT_MEMORY__TTL_S=abc`: the example is the setting's own default, not a generic object."""
        assert _error({"LOGAGENT_MEMORY__TTL_S": "abc"}) == (
            "LOGAGENT_MEMORY__TTL_S is not JSON: write a JSON object, "
            "e.g. LOGAGENT_MEMORY__TTL_S='{\"default\":2592000.0}'")

    def test_a_key_set_as_its_own_variable_is_named_as_that_variable(self) -> None:
        """`LOGAGENT_MEMORY__TTL_S__DEFAULT=abc` names that variable and its value (it named TTL_S alone)."""
        assert _error({"LOGAGENT_MEMORY__TTL_S__DEFAULT": "abc"}) == (
            "LOGAGENT_MEMORY__TTL_S__DEFAULT=abc is invalid: input should be a valid number, unable to parse "
            "string as a number")

    def test_a_record_in_a_mapping_names_its_missing_field(self) -> None:
        """A repository entry without `url` says which entry lacks which field."""
        assert _error({"LOGAGENT_REPO__SERVERS": '{"shop": {"branch": "main"}}'}).startswith(
            "LOGAGENT_REPO__SERVERS is invalid at .shop.url: field required; e.g. LOGAGENT_REPO__SERVERS='")

    def test_the_ollama_shorthand_beside_its_setting_must_agree(self) -> None:
        """A trial set both to different URLs: the shorthand was dropped without a word."""
        assert "LOGAGENT_OLLAMA_URL and LOGAGENT_OLLAMA__URL name two URLs: set one" in _error(
            {"LOGAGENT_OLLAMA_URL": "http://a:1", "LOGAGENT_OLLAMA__URL": "http://b:2"})

    def test_a_misspelt_key_of_a_servers_repository_is_refused(self) -> None:
        """A trial's `brnch` and `tokenfile` were dropped without a word: the default branch was read, no token."""
        assert _error({"LOGAGENT_REPO__SERVERS": '{"shop": {"url": "file:///x", "brnch": "dev"}}'}).startswith(
            "LOGAGENT_REPO__SERVERS is invalid at .shop.brnch: extra inputs are not permitted")

    def test_a_group_written_as_json_names_the_group_and_the_field(self) -> None:
        """`LOGAGENT_WINDOW={"quiet_s": "soon"}` names LOGAGENT_WINDOW, which was set (it named
        LOGAGENT_WINDOW__QUIET_S, which was not)."""
        assert _error({"LOGAGENT_WINDOW": '{"quiet_s": "soon"}'}).startswith(
            'LOGAGENT_WINDOW is invalid at .quiet_s ("soon"): input should be a valid number')

    def test_a_list_item_is_named_by_its_index(self) -> None:
        """A wrong item of a list setting is named `[i]` under the variable (it was `..._SERVERS__0__*`)."""
        assert _error({"LOGAGENT_NOTIFY__SLACK__STATUSES": '["analyzed", "sent"]'}).startswith(
            "LOGAGENT_NOTIFY__SLACK__STATUSES is invalid at [1] (\"sent\"): input should be 'analyzed', ")

    def test_a_secret_inside_json_is_never_echoed(self) -> None:
        """A wrong secret field in a group's JSON is named, its value is not."""
        message = _error({"LOGAGENT_KAFKA": '{"sasl_password": 123456789}'})
        assert message.startswith("LOGAGENT_KAFKA is invalid at .sasl_password: ") and "123456789" not in message

    def test_a_url_inside_json_is_shown_without_its_password(self) -> None:
        """A repository entry's URL may carry a token: the value is shown masked."""
        message = _error({"LOGAGENT_REPO__SERVERS": '{"shop": {"url": "https://x:s3cret@git.example", "branch": 5,'
                                                    ' "token_env": ["https://x:s3cret@git.example"]}}'})
        assert "s3cret" not in message and "LOGAGENT_REPO__SERVERS is invalid at .shop." in message

    def test_the_cli_prints_it_as_one_line_with_exit_code_2(self, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
        """Through `logagent config`: one stderr line, exit 2, nothing on stdout."""
        monkeypatch.setenv("LOGAGENT_MEMORY__TTL_S", '{"default": "abc"}')
        assert main(["config"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith(
            'logagent: LOGAGENT_MEMORY__TTL_S is invalid at .default ("abc")') and captured.err.count("\n") == 1

    @pytest.mark.parametrize(("value", "said"), [
        ('{"quiet_s": 5, "quiet": 9}', "LOGAGENT_WINDOW is invalid at .quiet: no such setting; did you mean .quiet_s?"),
        ('{"zzz": 1}', "LOGAGENT_WINDOW is invalid at .zzz: no such setting; see `logagent config`"),
    ])
    def test_a_misspelt_key_in_a_groups_json_is_refused(self, value: str, said: str) -> None:
        """pydantic drops an unknown key of a group's JSON, which would leave that setting's default silently
        in force: it is refused like a misspelt variable, with the closest real key."""
        assert _error({"LOGAGENT_WINDOW": value}) == said

    def test_a_nested_groups_misspelt_key_is_named_by_its_path(self) -> None:
        """`LOGAGENT_NOTIFY={"slack": {"enabeld": true}}` names `.slack.enabeld` and `.slack.enabled`; keys
        match in any case, as pydantic reads them."""
        assert _error({"LOGAGENT_NOTIFY": '{"slack": {"enabeld": true}}'}) == (
            "LOGAGENT_NOTIFY is invalid at .slack.enabeld: no such setting; did you mean .slack.enabled?")
        assert _accepted({"LOGAGENT_WINDOW": '{"QUIET_S": 5}'}).window.quiet_s == 5


class TestWhatAnErrorEchoes:
    """A settings error quotes what was set: never in a way that breaks the line, the terminal or a secret."""

    @pytest.mark.parametrize("environ", [
        {"LOGAGENT_MEMORY__TTL_S": '{"default": -98765432109876543210}'},
        {"LOGAGENT_HTTP": '{"port": 18446744073709551616}'},
        {"LOGAGENT_INPUT__IN_APP_PREFIXES": "[18446744073709551616]"},
    ])
    def test_an_integer_past_64_bits_is_quoted_not_a_traceback(self, environ: dict[str, str]) -> None:
        """orjson cannot write such an integer (the error raised TypeError, exit 1)."""
        (name,) = environ
        assert _error(environ).startswith(f"{name} is invalid at ")

    @pytest.mark.parametrize("environ", [
        {"LOGAGENT_MEMORY__STORAGE__EXTRA": '{"aws_secret_access_key": 987654321}'},
        {"LOGAGENT_MEMORY": '{"storage": {"extra": {"azure_storage_account_key": [987654321]}}}'},
        {"LOGAGENT_MEMORY__TTL_S": '{"api_token": "987654321x"}'},
        {"LOGAGENT_MEMORY__TTL_S__DB_PASSWORD": "987654321x"},
    ])
    def test_a_value_under_a_key_named_like_a_secret_is_never_echoed(self, environ: dict[str, str]) -> None:
        """Whatever its type: a number under `aws_secret_access_key` was quoted (attacker review)."""
        message = _error(environ)
        assert "98765432" not in message and message.startswith(next(iter(environ))), message

    def test_a_misspelt_key_is_shown_short_and_without_a_password(self) -> None:
        message = _error({"LOGAGENT_KAFKA": '{"https://user:hunter2@host/' + "x" * 5000 + '": 1}'})
        assert "hunter2" not in message and len(message) < 300

    def test_terminal_escapes_reach_the_terminal_as_text(self, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
        """An OSC title and a clear-screen in a key (or any value an error quotes) are shown escaped."""
        monkeypatch.setenv("LOGAGENT_KAFKA", '{"\\u001b]0;pwned\\u0007\\u001b[2J\\u202e": 1}')
        assert main(["config"]) == 2
        err = capsys.readouterr().err
        assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err and "\\x1b]0;pwned\\x07" in err


class TestSettingsThatWouldFailLater:
    """Each of these started the service, which then looped or stalled (attacker review): now one line at
    start, naming the variable."""

    @pytest.mark.parametrize(("env", "said"), [
        ({"LOGAGENT_KAFKA__DLQ_TOPIC": "errors"}, "LOGAGENT_KAFKA__DLQ_TOPIC and LOGAGENT_KAFKA__INPUT_TOPIC are both"),
        ({"LOGAGENT_REPARTITION__TOPIC": "errors"}, "LOGAGENT_REPARTITION__TOPIC and LOGAGENT_KAFKA__INPUT_TOPIC"),
        ({"LOGAGENT_KAFKA__OUTPUT_TOPIC": "analyses", "LOGAGENT_KAFKA__REVIEW_TOPIC": "analyses"},
         "LOGAGENT_KAFKA__REVIEW_TOPIC and LOGAGENT_KAFKA__OUTPUT_TOPIC are both 'analyses'"),
        ({"LOGAGENT_KAFKA__OUTPUT_TOPIC": "bad topic"}, "LOGAGENT_KAFKA__OUTPUT_TOPIC='bad topic': a topic name"),
        ({"LOGAGENT_KAFKA__DLQ_TOPIC": ""}, "LOGAGENT_KAFKA__DLQ_TOPIC='': a topic name"),
        ({"LOGAGENT_NOTIFY__DLQ_TOPIC": "x" * 250}, "LOGAGENT_NOTIFY__DLQ_TOPIC="),
        ({"LOGAGENT_KAFKA__COMMIT_INTERVAL_S": "inf"}, "LOGAGENT_KAFKA__COMMIT_INTERVAL_S is not a finite number"),
        ({"LOGAGENT_WINDOW__MAX_LENGTH_S": "1e12"}, "LOGAGENT_WINDOW__MAX_LENGTH_S=1e12 is invalid: input should"),
        ({"LOGAGENT_AGENT__TIMEOUT_S": "Infinity"}, "LOGAGENT_AGENT__TIMEOUT_S is not a finite number"),
    ])  # fmt: skip
    def test_a_topic_clash_a_bad_name_or_an_endless_value_stops_the_start(self, env: dict[str, str],
                                                                          said: str) -> None:
        message = _error(env)
        assert len(message.splitlines()) == 1 and message.startswith(said), message

    @pytest.mark.parametrize(("env", "said"), [
        ({"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": "PLAINTEXT://kafka:9092"}, "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS="),
        ({"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": "::1"}, "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS=::1 is invalid"),
        ({"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": "kafka:\uff19\uff10"}, "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS=kafka:"),
        ({"LOGAGENT_KAFKA__GROUP_ID": "team:x"}, "LOGAGENT_REPARTITION__TOPIC (from LOGAGENT_KAFKA__GROUP_ID)="),
    ])  # fmt: skip
    def test_what_the_kafka_client_would_misread_is_refused(self, env: dict[str, str], said: str) -> None:
        message = _error(env)
        assert len(message.splitlines()) == 1 and message.startswith(said), message

    @pytest.mark.parametrize("env", [
        {"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": "kafka"}, {"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": "[::1]:9092,[::1]"},
        {"LOGAGENT_NOTIFY__DLQ_TOPIC": "errors.dlq"},
    ])  # fmt: skip
    def test_what_worked_before_still_does(self, env: dict[str, str]) -> None:
        """A broker without its port (9092), and one DLQ for the service and notify (neither is read)."""
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            load_settings(os.environ)

    def test_keyed_input_needs_no_repartition_topic(self) -> None:
        """With input keyed by server the repartition topic is unused: its derived name clashes with nothing."""
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("LOGAGENT_INPUT__KEYED_BY_SERVER", "true")
            patch.setenv("LOGAGENT_REPARTITION__TOPIC", "errors")
            assert load_settings(os.environ).input.keyed_by_server
