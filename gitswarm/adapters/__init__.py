"""The adapters runtime: running agent processes and turning their outcomes into artifacts.

It sits beside the store, above the model: it never imports the store or the engine.
"""
