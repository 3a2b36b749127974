"""Understanding one error: input shapes, stack traces, fingerprint, redaction, code tools, localiser, agent."""
