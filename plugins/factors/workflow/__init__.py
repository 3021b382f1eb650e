"""Built-in ``workflow`` levels: ``react``, ``plan_execute`` and ``verify_recover``.

Each module is its own plugin. Each declares a :class:`~harnessgrid.episode.WorkflowProtocol`
so the scripted oracle can follow it, and explains its rules in ``prompt_section``.
"""
