"""Links to the code on the git host, and the burst's span."""

from __future__ import annotations

import pytest

from consumer.notify.notice import Burst
from consumer.notify.render import SourceLinks, prose_and_code, span_text, web_url


class TestWebUrl:
    @pytest.mark.parametrize(("remote", "web"), [
        ("https://github.com/acme/shop.git", "https://github.com/acme/shop"),
        ("https://x-access-token:secret@github.com/acme/shop.git", "https://github.com/acme/shop"),
        ("git@github.com:acme/shop.git", "https://github.com/acme/shop"),
        ("ssh://git@gitlab.example.com:2222/group/sub/shop.git", "https://gitlab.example.com/group/sub/shop"),
        ("https://git.example.com:8443/acme/shop/", "https://git.example.com:8443/acme/shop"),
    ])
    def test_remotes_become_browsable_urls_without_credentials(self, remote: str, web: str) -> None:
        """https, scp-like and ssh remotes map to the https page; a token in the URL never survives."""
        assert web_url(remote) == web

    @pytest.mark.parametrize("remote", ["file:///srv/git/shop", "/srv/git/shop", "../shop"])
    def test_local_repositories_have_no_web_page(self, remote: str) -> None:
        """A local path or file URL links nowhere."""
        assert web_url(remote) is None


class TestSourceLinks:
    def test_templates_for_other_hosts(self) -> None:
        """GitLab-style templates give /-/blob/ links; a missing line drops the anchor."""
        links = SourceLinks({"s": "https://gl.example/g/p"}, "{repo}/-/blob/{commit}/{path}#L{line}",
                            "{repo}/-/commit/{commit}")
        assert links.source("s", "abc", "src/a b.py", 3) == "https://gl.example/g/p/-/blob/abc/src/a%20b.py#L3"
        assert links.source("s", "abc", "src/a.py", None) == "https://gl.example/g/p/-/blob/abc/src/a.py"
        assert links.commit("s", "abc") == "https://gl.example/g/p/-/commit/abc"
        assert links.source("other", "abc", "a.py", 1) is None and links.commit("s", None) is None

    def test_a_template_with_an_unknown_field_fails_its_check(self) -> None:
        """`check` rejects a typo before the service starts."""
        with pytest.raises(KeyError):
            SourceLinks({}, "{repo}/blob/{sha}/{path}").check()


class TestText:
    def test_span(self) -> None:
        """Count, duration and start time in UTC."""
        burst = Burst(server="s", fingerprint="f", first_seen=0.0, last_seen=3725.0, count=7)
        assert span_text(burst) == "7 events in 1h 2m, from 1970-01-01 00:00:00 UTC"

    def test_numbered_source_lines_are_code(self) -> None:
        """The localiser's `N| code` excerpt is split from the prose around it."""
        assert prose_and_code("Boom.\n\nCode at a.py:\n1| x = 1\n2| y = 2\nAfter.") == [
            (False, "Boom.\n\nCode at a.py:"), (True, "1| x = 1\n2| y = 2"), (False, "After.")]
