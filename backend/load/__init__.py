"""The load generator (engine, its child process, the facade the console uses), its plain
data, where load goes, and measuring a sustainable rate."""
