"""Built-in factor levels: a folder per factor, a module per level, each its own plugin."""
