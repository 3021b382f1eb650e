"""Built-in plugins: factor levels, adapters, task suites and policy backends.

They register through the same hooks a third-party package uses; :data:`BUILTIN_PLUGINS` lists
the modules holding their ``@hookimpl`` functions (conda's layout), in registration order.
"""

BUILTIN_PLUGINS: tuple[str, ...] = (
    "harnessgrid.plugins.policies",
)
