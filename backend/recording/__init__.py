"""Recorded sessions: every sample, change and event of a console session in one SQLite
file, written off the GUI thread (recorder), read back offline (reader), listed and
managed (library), compared (compare) and exported (export). Plain Python, no Qt."""
