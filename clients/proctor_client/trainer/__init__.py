"""The reference GRPO trainer (the ProRL recipe) scored by Proctor: `proctor-train`.

Needs the `trainer` extra (torch, transformers, pyyaml, tensorboard); the plain SDK never imports
this package. The loop is `grpo.py`; the modules beside it are its tested pieces.
"""
