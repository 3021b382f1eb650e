"""A chat policy's turns written as a student model's tokens (demonstrations for SFT).

Supervised warm starts and black-box SFT learn from a *teacher* -- the scripted
oracle, an API model -- whose turns are messages, not token ids. :class:`TeacherForcedPolicy`
plays the teacher through the episode but records each turn the way the *student* would have
produced it: the assistant message rendered by the student's chat template (content and tool
calls in the template's own syntax, then its end-of-turn token), as completion ids of a
:class:`~harnessgrid.models.TokenRecord`, with prompt ids built by the same
:class:`~harnessgrid.policies.token.TokenBookkeeper` as the ``hf:`` policy. So demonstration
rows and RL rows have the same shape -- append-only segments, a mask that is 1 exactly on the
assistant's tokens -- and history is never re-tokenised.

The recorded "logprobs" are 0.0: nothing was sampled, and SFT does not read them.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import ConfigError
from harnessgrid.models import Message, ModelTurn, ToolSpec
from harnessgrid.policies import Policy, PolicyRequest, bind_to_episode
from harnessgrid.policies.token import Generation, TokenBookkeeper, stop_token_ids

if TYPE_CHECKING:
    from harnessgrid.episode import EpisodeState
    from harnessgrid.harness import Harness
    from harnessgrid.tasks import Task

__all__ = ["TeacherForcedPolicy"]

_USER = {"role": "user", "content": "x"}


class TeacherForcedPolicy:
    """``teacher``'s turns as ``tokenizer``'s tokens (see the module docstring)."""

    def __init__(self, teacher: Policy, tokenizer: Any, *, max_episodes: int = 4096) -> None:
        self.teacher = teacher
        self.spec = f"forced:{teacher.spec}"
        self.book = TokenBookkeeper(tokenizer, stop_ids=stop_token_ids(tokenizer),
                                    max_episodes=max_episodes)
        if self.book.closing is None:
            raise ConfigError(f"{self.spec}: the student's chat template does not render an "
                              "assistant message verbatim, so a teacher's turns cannot be "
                              "written in it", hint="use a chat model's tokenizer")
        self._prefix = self.book._render([_USER], None, generation_prompt=True)

    def for_episode(self, harness: Harness, task: Task, state: EpisodeState) -> Policy:
        """This policy for one episode, its teacher bound to it when the teacher plays from
        the episode (the scripted oracle: :class:`~harnessgrid.policies.EpisodePolicy`); the
        token book stays the one shared by every episode."""
        teacher = bind_to_episode(self.teacher, harness, task, state)
        if teacher is self.teacher:
            return self
        bound = copy.copy(self)
        bound.teacher = teacher
        return bound

    async def act(self, request: PolicyRequest) -> ModelTurn:
        turn = await self.teacher.act(request)
        return await asyncio.to_thread(self._record, request, turn)

    def count_tokens(self, messages: Sequence[Message],
                     tools: Sequence[ToolSpec] | None = None) -> int:
        return self.book.count_tokens(messages, tools)

    def completion_ids(self, turn: ModelTurn, native_tools: bool) -> list[int]:
        """The assistant message of ``turn`` as the student's template writes it, up to and
        including its end-of-turn token (what a model would have generated)."""
        message = turn.message() if native_tools else Message(role="assistant",
                                                              content=turn.content)
        full = self.book._render([_USER, message.openai()], None, generation_prompt=False)
        closing = self.book.closing
        assert closing is not None
        if not full.startswith(self._prefix) or not full.endswith(closing):
            raise ConfigError(f"{self.spec}: the student's chat template renders an assistant "
                              "turn in a way that cannot be isolated",
                              hint="use a ChatML-style template")
        body = full[len(self._prefix):len(full) - len(closing)]
        ids = self.book._encode_text(body)
        # End the turn as a model does: with the stop token the closing starts with.
        stop = next((i for i in sorted(self.book.stop_ids)
                     if closing.startswith(self.book._decode([i], skip_special=False))), None)
        return ids + ([stop] if stop is not None else [])

    def _record(self, request: PolicyRequest, turn: ModelTurn) -> ModelTurn:
        pending = self.book.begin(request, max_new_tokens=1 << 30)
        ids = self.completion_ids(turn, request.native_tools)
        recorded = self.book.finish(pending, Generation(ids, [0.0] * len(ids), "stop"))
        # The episode goes on with the teacher's own message (call ids and arguments as it
        # wrote them); the tokens are that message as the student's template renders it.
        calls = turn.tool_calls if request.native_tools else ()
        return recorded.model_copy(update={"tool_calls": calls, "content": turn.content})
