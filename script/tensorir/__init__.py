"""TensorIR in TVMScript, organised by construct: each module holds the parse rule and the print
rule of its builtins side by side (loops, blocks, buffers, threads, attrs, statements, functions,
exprs), registered in one table (rules.py) through which the parser core (parser_core.py) and
the printer core (printer_core.py) dispatch. The expression evaluator (evaluator.py) is what the
Relax builder reads TensorIR expressions with.

Importing either core loads every construct module, so both tables are whole. (Nothing is
imported here: the printer side is needed while ``script.comments`` is still loading.)"""
