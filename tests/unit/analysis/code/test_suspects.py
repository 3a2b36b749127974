"""The null-dereference rules of the localiser, after they were rewritten to run in linear time."""

from __future__ import annotations

from analysis.code.suspects import is_null_dereference, null_callee, receiver_type


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


class TestReceiverType:
    def test_the_declared_type_of_the_receiver_in_each_language(self) -> None:
        """A field or parameter (Java), an annotation (TypeScript), an instance assigned (Python)."""
        java = ["    private final CustomerRepository customers;", "    private final CartRepository carts;",
                "        var cart = carts.findById(cartId);", "        Customer c = customers.findById(id);"]
        assert receiver_type("findById", java) == "CustomerRepository"
        typescript = ["  constructor(private repo: UserRepo) {}", "    const u = this.repo.get(id);"]
        assert receiver_type("get", typescript) == "UserRepo"
        assert receiver_type("find", ["        self.store = AccountStore(db)", "        a = self.store.find(i)"]) == (
            "AccountStore")

    def test_comments_and_optional_do_not_mislead_it(self) -> None:
        """Third attacker review: `// Load customers` read as a declaration of type Load, `Optional[...]` as
        the type itself."""
        java = ["    // Load customers, then pick one", "    private final CustomerRepository customers;",
                "        Customer c = customers.find(id);"]
        assert receiver_type("find", java) == "CustomerRepository"
        python = ["        self.customers: Optional[CustomerRepository] = None", "        c = self.customers.find(i)"]
        assert receiver_type("find", python) == "CustomerRepository"

    def test_no_call_or_no_declaration_gives_none(self) -> None:
        """Nothing to go on is said as None, never a guess."""
        assert receiver_type("find", ["x = 1"]) is None
        assert receiver_type("find", ["    a = store.find(i)"]) is None
