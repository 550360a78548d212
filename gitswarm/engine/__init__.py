"""The engine layer: what commands do, built on the store and the model."""
