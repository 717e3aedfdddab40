"""livectl."""
