"""The store layer: git refs, the SQLite index and the transitions that keep them in step."""
