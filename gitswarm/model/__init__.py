"""The model layer: records, ids, the codec, the reducer and errors. Imports nothing above it."""
