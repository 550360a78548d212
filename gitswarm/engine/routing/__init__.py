"""Which adapter and model an agent attempt gets, and what agent runs cost.

`route`: the adapter, model and tier of one attempt and the receipt its run
records; `adapter_checks`: `adapters list|check` and their preflight cache;
`cost`: spending read from the index's runs table.
"""
