"""The CLI layer: typer commands, output and the one error boundary."""
