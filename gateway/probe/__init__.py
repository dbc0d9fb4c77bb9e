"""``ft-gateway probe``: measure which request fields an engine honours, and write the policy."""
