"""Built-in task suites and the loaders of external task formats."""
