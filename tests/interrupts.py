"""Child processes a test interrupts with Ctrl-C.

A shell's background job (``nohup ... &``, a CI step started in the background) runs with
SIGINT ignored, and its children inherit that: Python then installs no KeyboardInterrupt handler,
and a test that sends SIGINT to its child finds the signal ignored (the evaluation runs to the
end, or hangs on a policy that never answers). ``preexec_fn=sigint_default`` gives the child
the default disposition, as an interactive shell would.
"""

from __future__ import annotations

import signal


def sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
