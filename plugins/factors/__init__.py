"""plugins/factors."""
