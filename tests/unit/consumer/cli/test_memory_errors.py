"""A memory that cannot be reached ends `logagent memory ...` with one line, exit 2, never a traceback."""

from __future__ import annotations

import pytest

from consumer.cli.common import UsageError
from consumer.cli.memory import _store_errors

# What LanceDB 0.40 raises for an s3:// memory whose bucket's region cannot be resolved (no network, no
# LOGAGENT_MEMORY__STORAGE__REGION): a plain RuntimeError ending in a place in its Rust sources.
_LANCE_S3 = ("lance error: LanceError(IO): Generic S3 error: Failed to resolve region for bucket 'nobucket', "
             "/home/builder/.cargo/registry/src/lance-io-13.0.0/src/object_store/providers/aws.rs:319:13")


class TestStoreErrors:
    @pytest.mark.parametrize("error", [RuntimeError(_LANCE_S3), OSError(5, "Input/output error"),
                                       ValueError("Invalid input, No object store provider found for scheme: 'foo'")],
                             ids=["RuntimeError", "OSError", "ValueError"])
    def test_a_store_fault_is_a_usage_error(self, error: Exception) -> None:
        """Each fault LanceDB raises on opening or reading a memory becomes a one-line UsageError (a
        RuntimeError escaped as a traceback)."""
        with pytest.raises(UsageError, match=r"^memory error: ") as refused, _store_errors():
            raise error
        assert "\n" not in str(refused.value)

    def test_the_place_in_lancedbs_sources_is_left_out(self) -> None:
        """The line says what failed, not where in a build machine's Rust sources."""
        with pytest.raises(UsageError) as refused, _store_errors():
            raise RuntimeError(_LANCE_S3)
        assert str(refused.value) == (
            "memory error: lance error: LanceError(IO): Generic S3 error: Failed to resolve region for bucket "
            "'nobucket'")
