"""Tools that maintain the repository (not shipped in the package)."""
