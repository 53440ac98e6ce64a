"""Executors: one module each, one interface (base.Executor)."""
