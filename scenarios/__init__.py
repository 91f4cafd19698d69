"""The application: scenario files (TOML), their validation, the ``edgesim`` CLI, sweeps."""
