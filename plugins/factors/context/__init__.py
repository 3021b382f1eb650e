"""Built-in ``context`` levels: ``full``, ``window`` and ``compact``.

Each module is its own plugin. All three keep the system prompt, the task message and every
pinned message, and never break tool-call structure (an assistant message with tool calls is
always followed by its ``tool`` results); ``window`` and ``compact`` also stay within the token
budget whenever the pinned messages alone fit. Shared machinery is in :mod:`._common`.
"""
