"""plugins/adapters."""
