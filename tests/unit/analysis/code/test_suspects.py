"""The null-dereference rules of the localiser, after they were rewritten to run in linear time."""

from __future__ import annotations

from analysis.code.suspects import is_null_dereference, null_callee


class TestNullDereference:
    def test_helpful_npe_because_clause(self) -> None:
        """Java's `because "<x>" is null` reads as a null dereference, on any line of the message."""
        assert is_null_dereference("IllegalStateException", 'Cannot invoke "String.length()" because "name" is null')
        assert is_null_dereference("Boom", 'wrapped\nCannot invoke "A.b()" because the return value is null')

    def test_other_failures_are_not(self) -> None:
        """A message without a null value is no dereference."""
        assert not is_null_dereference("TimeoutError", "failed because it was slow")


class TestNullCallee:
    def test_call_then_attribute(self) -> None:
        """`repo.find(id).name` names `find` as the function whose result was None."""
        line = "    return repo.find(customer_id).name"
        assert null_callee("'NoneType' object has no attribute 'name'", line, []) == "find"

    def test_indexed_receiver_assigned_above(self) -> None:
        """`users[0].name` goes back to where `users` was assigned."""
        before = ["users = load_users(path)"]
        line = "print(users[0].name)"
        assert null_callee("'NoneType' object has no attribute 'name'", line, before) == "load_users"
