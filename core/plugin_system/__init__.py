"""The plugin system: the registry that loads plugins through pluggy, and composition of a
configuration's levels into a runnable harness."""
