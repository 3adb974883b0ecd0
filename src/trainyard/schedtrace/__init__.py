"""Trace-driven GPU scheduling benchmark: trace generation, metrics (pure) and the replay (I/O)."""
