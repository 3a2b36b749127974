"""The repartition topic as the service creates it on a real broker: its partitions and its replicas.

The session's tansu broker is a one-broker cluster, like the demo and small deployments: left unset, the
replication factor follows the brokers the cluster's metadata lists (one here), and a factor the cluster
cannot hold stops the start with one line naming the setting.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from consumer.kafka import ensure_repartition_topic, require_input_topic
from consumer.settings import ConfigError, Settings
from demo.broker import EmbeddedBroker
from tests.conftest import SettingsFactory, service_env

pytestmark = pytest.mark.integration


async def _describe(bootstrap_servers: str, topic: str) -> dict[str, Any] | None:
    """The topic as the broker describes it, None when the broker does not list it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            return None
        (described,) = await admin.describe_topics([topic])
        return dict(described)
    finally:
        await admin.close()


def _ensure(settings: Settings) -> str:
    return asyncio.run(ensure_repartition_topic(settings.kafka, settings.repartition,
                                                settings.input.max_message_bytes))


class TestReplicationFactor:
    def test_unset_takes_the_one_broker_of_the_cluster(self, settings_factory: SettingsFactory,
                                                       tansu: EmbeddedBroker,
                                                       caplog: pytest.LogCaptureFixture) -> None:
        """Default settings on one broker: the topic gets the input's 3 partitions, each with 1 replica, and
        the choice is logged once."""
        settings = settings_factory(partitions=3)
        assert settings.repartition.replication_factor == 0, "the default detects"
        with caplog.at_level(logging.INFO, logger="consumer.kafka"):
            name = _ensure(settings)
        described = asyncio.run(_describe(tansu.bootstrap_servers, name))
        assert described is not None, f"{name} not created"
        assert len(described["partitions"]) == 3
        assert {len(p["replicas"]) for p in described["partitions"]} == {1}
        chosen = [r for r in caplog.records if r.getMessage() == "repartition replication factor from the cluster"]
        assert len(chosen) == 1
        assert chosen[0].fields["replication_factor"] == 1 and chosen[0].fields["brokers"] == 1  # type: ignore[attr-defined]

    def test_an_explicit_factor_is_honoured(self, settings_factory: SettingsFactory, tansu: EmbeddedBroker,
                                            caplog: pytest.LogCaptureFixture) -> None:
        """An explicit factor is used as given, without asking the cluster."""
        settings = settings_factory(partitions=2, repartition={"replication_factor": 1})
        with caplog.at_level(logging.INFO, logger="consumer.kafka"):
            name = _ensure(settings)
        described = asyncio.run(_describe(tansu.bootstrap_servers, name))
        assert described is not None and {len(p["replicas"]) for p in described["partitions"]} == {1}
        assert not [r for r in caplog.records if "from the cluster" in r.getMessage()]

    def test_more_replicas_than_brokers_is_a_config_error(self, settings_factory: SettingsFactory,
                                                          tansu: EmbeddedBroker) -> None:
        """3 replicas on one broker: a ConfigError naming the setting and the broker count; no topic."""
        settings = settings_factory(partitions=2, repartition={"replication_factor": 3})
        with pytest.raises(ConfigError) as raised:
            _ensure(settings)
        assert str(raised.value) == ("LOGAGENT_REPARTITION__REPLICATION_FACTOR=3 but the Kafka cluster has 1 "
                                     "broker(s): set it to at most 1, or 0 to take min(3, brokers)")
        name = settings.repartition.topic_for(settings.kafka.group_id)
        assert asyncio.run(_describe(tansu.bootstrap_servers, name)) is None

    def test_logagent_run_exits_2_with_one_line(self, settings_factory: SettingsFactory, tmp_path: Path) -> None:
        """`logagent run` with an impossible factor: exit 2, one line on stderr, no traceback."""
        settings = settings_factory(partitions=1)
        repos_file = tmp_path / "repos.json"
        repos_file.write_text(json.dumps({}))
        env = service_env(settings, repos_file) | {"LOGAGENT_REPARTITION__REPLICATION_FACTOR": "3"}
        done = subprocess.run([sys.executable, "-m", "consumer.cli", "run"], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "LOGAGENT_REPARTITION__REPLICATION_FACTOR=3" in lines[0], done.stderr


class TestTheInputTopic:
    def test_a_mistyped_input_topic_is_refused_once_the_group_ran_before(self, settings_factory: SettingsFactory,
                                                                        tansu: EmbeddedBroker) -> None:
        """A trial: after one run of the group its repartition topic existed, so a mistyped input topic was
        subscribed to, created empty by the broker, and read: ready, and reading nothing. Now it is refused
        however the service reads its input, and not created."""
        settings = settings_factory(partitions=2)
        _ensure(settings)  # the group's first run
        mistyped = settings.model_copy(update={"kafka": settings.kafka.model_copy(
            update={"input_topic": settings.kafka.input_topic + "-mistyped"})})
        said = (f"the input topic '{mistyped.kafka.input_topic}' does not exist: create it, or check "
                "LOGAGENT_KAFKA__INPUT_TOPIC")
        with pytest.raises(ConfigError) as raised:
            _ensure(mistyped)
        assert str(raised.value) == said
        with pytest.raises(ConfigError) as raised:
            asyncio.run(require_input_topic(mistyped.kafka))
        assert str(raised.value) == said
        assert asyncio.run(_describe(tansu.bootstrap_servers, mistyped.kafka.input_topic)) is None
        asyncio.run(require_input_topic(settings.kafka))  # the real one passes
