"""The command-line tools that run without a window: auto-tune a deployment, export a
recorded session."""
