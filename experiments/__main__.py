"""`python -m experiments COMMAND [flags]`: the `codesign` command from a
checkout (`experiments.cli`)."""

from experiments import cli

if __name__ == '__main__':
  cli.main()
