"""Figures from run folders (reads run outputs only: rounds.csv, summary.json)."""
