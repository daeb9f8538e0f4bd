"""The pure health model: evidence, policy and `now` in, a verdict out.

Nothing here reads a clock, a file, a database or the environment, and nothing here
imports another part of sidewatch (a test walks the AST to keep it so).
"""
