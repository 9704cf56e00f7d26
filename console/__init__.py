"""The console process: entry point, main window, and the wiring that keeps network work
off the GUI thread and turns its results into Qt signals."""
