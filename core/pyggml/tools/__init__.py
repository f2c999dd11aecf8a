"""Small command-line helpers used by the Makefile."""
