"""plugins/tasks."""
