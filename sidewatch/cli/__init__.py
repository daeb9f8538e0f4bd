"""The `sidewatch` command line (click)."""
