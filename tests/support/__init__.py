"""Test fixtures that the product does not ship: a reference HTTP server for the load
generator, a reference LRU cache."""
