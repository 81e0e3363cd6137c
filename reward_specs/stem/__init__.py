"""The STEM domain: the scorer (`domain`), reading a choice letter (`choice_letters`) and a
number with its unit (`numbers`)."""

from reward_specs.stem.domain import SCORER, StemConfig, StemReference, parse_number

__all__ = ["SCORER", "StemConfig", "StemReference", "parse_number"]
