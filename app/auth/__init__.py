"""Authentication: who is calling, and for which tenant."""
