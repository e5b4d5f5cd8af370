"""The shell-command reader the gate trusts: lexer, command analysis, the paths a command
touches.
"""
