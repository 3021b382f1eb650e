"""TRL integration (GRPO, SFT) that consumes composed harnesses: DESIGN §8.

Not written yet; the package exists so the layout of DESIGN §2 holds and the wheel carries it.
"""
