"""The redaction eval's own search for addresses left in host names (it scores real data, so it must not
lean on the rules it checks)."""

from __future__ import annotations

import time

import pytest

from evals.redaction import host_addresses


@pytest.mark.parametrize(("text", "found"), [
    ("rhost=adsl-203-0-113-45.dsl.example.net", ["203-0-113-45"]),
    ("(dsl-static-192.000.002.017.example-ip.net) and host198.51.100.21.example.com",
     ["192.000.002.017", "198.51.100.21"]),
    ("customer-198-51-100-7-sta.example.mx, from host203.0.113.9.example.com.", ["198-51-100-7", "203.0.113.9"]),
    # A node's private name, a MAC, versions, a file, no domain after, a number past 255, a 0 first.
    ("ip-10-0-3-7.ec2.internal host-192-168-1-5.corp.lan 172.16.0.9.example.com", []),
    ('devices ( "84-41-67-32-db-e1" ) amd64~~6.1.1.0, wcp.dll version 0.0.0.6 client 203.0.113.45 refused', []),
    ("backup-12-05-23-10.tar.gz x-1-2-3-4 2.6.9-5.0.5.EL 300-1-2-3.example.com 0.1.2.3.example.com", []),
    ("hibernate-core-5.4.3.2.Final.jar rpm-1.2.3.4.el7.x86_64 jackson-2.13.4.2.jar.asc", []),
    # The last four numbers of a longer run; a top-level domain straight after; a label starting with a digit.
    ("ip10.203.0.113.9.example.com srv-10-198-51-100-7.example.net", ["203.0.113.9", "198-51-100-7"]),
    ("host203.0.113.9.com adsl-203-0-113-9.de host-198-51-100-7.1e100.net", ["203.0.113.9", "203-0-113-9",
                                                                              "198-51-100-7"]),
    ("host203.0.113.9.example.com.log.gz adsl-203-0-113-9.example.net.log.1", ["203.0.113.9", "203-0-113-9"]),
])  # fmt: skip
def test_finds_public_addresses_spelled_in_host_names(text: str, found: list[str]) -> None:
    assert host_addresses(text) == found


def test_takes_linear_time_on_dashed_labels() -> None:
    """A dash both separates and joins labels: a pattern that let it do either took 2.5 s at 26 of them."""
    started = time.process_time()
    assert host_addresses("1.2.3.4" + "-a" * 100_000 + "!") == []
    assert time.process_time() - started < 1.0
