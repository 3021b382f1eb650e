"""TRL integration: the harness-scaled GRPO/PPO trainer (:mod:`.grpo`, a subclass of TRL's
``GRPOTrainer``), supervised fine-tuning on demonstrations (:mod:`.sft`), the experiment config
(:mod:`.config`), rollouts, advantages and learning-signal accounting, and the CPU demo
(:mod:`.demo`). docs/training.md is the user's guide to it.
"""
