"""Built-in plugins: factor levels, adapters, task suites and policy backends.

They register through the same hooks a third-party package uses; :data:`BUILTIN_PLUGINS` lists
the modules holding their ``@hookimpl`` functions (conda's layout). Each factor level is its own
module and its own plugin, exactly as a third party's level would be.
"""

_LEVELS = {
    "system_prompt": ("minimal", "guidelines", "stepwise"),
    "tool_interface": ("function_calling", "xml_tags", "bash_only"),
    "observation": ("raw", "structured", "annotated"),
    "context": ("full", "window", "compact"),
    "workflow": ("react", "plan_execute", "verify_recover"),
}

BUILTIN_PLUGINS: tuple[str, ...] = (
    "harnessgrid.plugins.policies",
    "harnessgrid.plugins.tasks.examples",
    "harnessgrid.plugins.tasks.grid",
    "harnessgrid.plugins.tasks.clawgym",
    "harnessgrid.plugins.tasks.pinchbench",
    "harnessgrid.plugins.adapters.claude_code",
    "harnessgrid.plugins.adapters.openclaw",
    "harnessgrid.plugins.adapters.gemini_cli",
    "harnessgrid.plugins.adapters.mini_bash",
    *(f"harnessgrid.plugins.factors.{factor}.{level}"
      for factor, levels in _LEVELS.items() for level in levels),
)
