"""Client implementation (the sync twin in the sibling package is generated from this one)."""
