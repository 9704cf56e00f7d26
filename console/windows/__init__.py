"""The windows: views of the console's model (the main window and its parts, the auto-tune
and traffic windows, recorded sessions offline)."""
