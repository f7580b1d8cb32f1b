"""One module a command (`ocl-reconcile COMMAND`); reconcile/cli/parser.py finds and registers
each. A module says its `NAME`, `ORDER`, help, `PARENTS`, flags (`arguments`) and `command`."""
