"""Helpers of the code domain (`reward_specs.code_domain`): extraction, comparison, plans, cache."""
