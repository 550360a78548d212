"""Pilots: what a live agent drives gitswarm through (the MCP server, `gitswarm mcp`).

`actions` holds the tools as plain functions over the engine (no MCP import),
`proposals` the two-stage start of a delegation, `similar` the look for work
already under way, `watch` the wait for a change, `server` the MCP wiring,
`clients` and `install` the registration in each agent CLI's configuration.
"""
