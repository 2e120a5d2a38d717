"""tvms.script: TVMScript parser, printer and decorators."""
