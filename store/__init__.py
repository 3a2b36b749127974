"""Error memory: past analyses per server in LanceDB, ranked, scoped per tenant, fresh and correctable."""
