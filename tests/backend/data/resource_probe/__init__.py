"""A tiny Serve app for the resource-knob tests: each reply says what its replica got."""
