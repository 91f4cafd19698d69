"""The learning backend: data, models, executors and algorithms (torch lives here, never in edgesim)."""
