"""An OpenAI-compatible streaming app of known cadence for the OpenAI-load tests (not a demo)."""
