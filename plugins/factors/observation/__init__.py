"""Built-in ``observation`` levels: how a tool result is shown to the model.

One module per level, each registered as its own plugin:

- :mod:`.raw` — stdout then stderr verbatim, one hard cap;
- :mod:`.structured` — a JSON object with head+tail-cut fields;
- :mod:`.annotated` — a one-line status header, line-numbered file views and hints on errors.
"""
