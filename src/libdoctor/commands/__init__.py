"""One module per subcommand: ``register(sub)`` adds its parser; its ``run`` is the command.

Command modules are CLI code (they may print); they import heavy modules only inside ``run``
so that building the parser stays cheap.
"""
