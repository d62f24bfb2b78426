"""causalpos: the causal mask as a source of positional information (Kim et al., 2025)."""

__version__ = "0.1.0"
