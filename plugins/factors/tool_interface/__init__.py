"""Built-in ``tool_interface`` levels: how tools are named and how calls are written.

One module per level, each registered as its own plugin:

- :mod:`.function_calling` — native JSON tool calls (``read_file``, ``run_command``, ...);
- :mod:`.xml_tags` — XML-like tags written in the reply text (``<view/>``, ``<exec>``, ...);
- :mod:`.bash_only` — one fenced ```bash block per turn, finished by a sentinel line.

The three use different tool names and call syntaxes on purpose, so a policy that overfits one
of them notices when the harness changes.
"""
